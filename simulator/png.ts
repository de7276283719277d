import { crc32, deflateSync } from 'node:zlib';

// A minimal PNG encoder (8-bit truecolour, no interlace): enough to hand out real, decodable
// images without an image library. Each chunk is length, type, data and a CRC of type+data.

const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function chunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const typeAndData = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const checksum = Buffer.alloc(4);
  checksum.writeUInt32BE(crc32(typeAndData));
  return Buffer.concat([length, typeAndData, checksum]);
}

export type Rgb = readonly [number, number, number];

/** `paddingBytes` more in a private ancillary chunk (`fgPd`), which decoders skip: an image as
 * large as a real one without the pixels to encode. */
export function encodePng(width: number, height: number, colourAt: (x: number, y: number) => Rgb, paddingBytes = 0): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bits per channel
  header[9] = 2; // colour type: RGB
  // bytes 10-12 stay 0: deflate compression, adaptive filtering, no interlace

  // Every scanline starts with its filter type; 0 (none) keeps the encoder trivial.
  const rowLength = 1 + width * 3;
  const pixels = Buffer.alloc(rowLength * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const [red, green, blue] = colourAt(x, y);
      const offset = y * rowLength + 1 + x * 3;
      pixels[offset] = red;
      pixels[offset + 1] = green;
      pixels[offset + 2] = blue;
    }
  }
  const padding = paddingBytes > 0 ? [chunk('fgPd', Buffer.alloc(paddingBytes))] : [];
  return Buffer.concat([signature, chunk('IHDR', header), ...padding, chunk('IDAT', deflateSync(pixels)), chunk('IEND', Buffer.alloc(0))]);
}
