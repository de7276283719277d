import type { VideoModel } from './catalog.ts';

/** The price of a clip, in micro-USD: seconds × the per-second price at its resolution. */
export function videoPriceMicros(model: VideoModel, seconds: number, resolution: string): number {
  const perSecond = model.price_per_second_micros[resolution];
  if (perSecond === undefined) throw new Error(`model ${model.id} has no price for ${resolution}`);
  return seconds * perSecond;
}
