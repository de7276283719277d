import { createOpenAiVideosVendor } from './openai-videos/openai-videos-vendor.ts';
import { createSeedanceVideoVendor } from './seedance/seedance-video-vendor.ts';
import type { VendorConnection, VideoVendor } from './types.ts';

// The one place that knows the vendor folders: everything else asks for a protocol by name
// and gets the small VideoVendor interface back.

export type VideoVendorProtocol = 'seedance' | 'openai-videos';

export function createVideoVendor(protocol: VideoVendorProtocol, connection: VendorConnection): VideoVendor {
  switch (protocol) {
    case 'seedance':
      return createSeedanceVideoVendor(connection);
    case 'openai-videos':
      return createOpenAiVideosVendor(connection);
    default:
      // Reachable from an unchecked catalog file; fail at wiring time, not on the first task.
      throw new Error(`unknown video vendor protocol '${String(protocol satisfies never)}'`);
  }
}
