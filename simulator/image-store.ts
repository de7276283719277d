// Generated images, kept so their URLs can be fetched after the generation request. Bounded
// because benchmarks may generate many; the oldest fall out first (a Map iterates in
// insertion order), much as vendor URLs expire.

const maximumImages = 10_000;

export class ImageStore {
  private readonly images = new Map<string, Buffer>();

  add(id: string, png: Buffer): void {
    this.images.set(id, png);
    if (this.images.size > maximumImages) {
      const oldest = this.images.keys().next().value;
      if (oldest !== undefined) this.images.delete(oldest);
    }
  }

  find(id: string): Buffer | undefined {
    return this.images.get(id);
  }
}
