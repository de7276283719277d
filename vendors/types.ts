// The small interface every video vendor adapter implements. Shared code depends on this
// file only; nothing outside vendors/<vendor>/ may import a vendor's own modules.

export type ReferenceMediaType = 'image_url' | 'video_url' | 'audio_url';
export type ReferenceMediaRole =
  | 'reference_image'
  | 'reference_video'
  | 'reference_audio'
  | 'first_frame'
  | 'last_frame';

export interface ReferenceMedia {
  type: ReferenceMediaType;
  url: string;
  role: ReferenceMediaRole;
}

export interface VideoGenerationRequest {
  /** The vendor's own model name (the catalog maps our id to it). */
  upstreamModel: string;
  prompt: string;
  /** Clip length in whole seconds. */
  seconds?: number;
  ratio?: string;
  resolution?: string;
  generateAudio?: boolean;
  content: ReferenceMedia[];
}

/** A vendor task's state, normalised. `succeeded` without `videoUrl` means the clip is only
 * downloadable through the vendor's authenticated content endpoint (see `openContent`). */
export type VendorTaskStatus =
  | { state: 'queued' }
  | { state: 'running'; progress?: number }
  | { state: 'succeeded'; videoUrl?: string }
  /** `code` is the gateway's word for the failure, the same for every vendor (README, Video
   * tasks); `vendorCode` the vendor's own, kept for whoever needs to tell its cases apart. */
  | { state: 'failed'; reason: string; code: VideoFailureCode; vendorCode?: string };

/** Why a vendor ended a generation, in words that do not depend on the vendor. */
export type VideoFailureCode = 'content_policy_violation' | 'generation_failed' | 'generation_expired' | 'generation_cancelled';

export interface VideoVendor {
  /** Starts a generation. Throws VendorTransientError or VendorRejectedError. `idempotencyKey`
   * is the same on every try for one task, sent as the Idempotency-Key header: a vendor that
   * honours it answers a repeated create with the task the first one made, so a retry after
   * a lost answer starts (and bills) no second generation. A vendor that does not honour it
   * ignores the header. The workflow's activity always sends one. */
  start(request: VideoGenerationRequest, idempotencyKey?: string): Promise<{ vendorTaskId: string }>;
  /** Reads the vendor task. Throws VendorTransientError on network trouble, 429 or 5xx. */
  status(vendorTaskId: string): Promise<VendorTaskStatus>;
  /** Best effort cancellation of a vendor task (deadline exceeded). */
  cancel(vendorTaskId: string): Promise<void>;
  /** Streams the finished clip when the vendor gives no public URL; `request` carries the
   * caller's Range (a player seeking, a download resumed) and whether only headers are wanted. */
  openContent?(vendorTaskId: string, request?: ClipRequest): Promise<VendorClip>;
}

/** What a caller asked of a clip download, passed on to the vendor as is. */
export interface ClipRequest {
  /** HEAD: the vendor is asked for the headers only, so no clip is downloaded to be dropped. */
  headOnly?: boolean;
  range?: string;
  ifRange?: string;
}

/** A clip download as the vendor answered it: 200 whole, 206 a part, 416 a range past its end
 * (`body` then is empty). The length and range headers are the vendor's, for the caller. */
export interface VendorClip {
  status: 200 | 206 | 416;
  body: AsyncIterable<Uint8Array>;
  contentType: string;
  contentLength?: string;
  contentRange?: string;
  acceptRanges?: string;
  etag?: string;
  lastModified?: string;
}

/** Worth retrying: network failure, 408, 429 or 5xx. `retryAfterMs` echoes the vendor's Retry-After. */
export class VendorTransientError extends Error {
  override readonly name = 'VendorTransientError';
  constructor(
    message: string,
    readonly status?: number,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/** A definite refusal (a 4xx other than 408/429): retrying cannot help. */
/** Whether a vendor's own failure code is its moderation refusing the caller's content:
 * OpenAI's `moderation_blocked`, Seedance's `*SensitiveContentDetected` verdicts (input text,
 * image or video, output video). The same words at submission and at generation. */
export function isContentPolicyCode(vendorCode: string | undefined): boolean {
  return vendorCode !== undefined && (vendorCode === 'moderation_blocked' || /Sensitive/i.test(vendorCode));
}

export class VendorRejectedError extends Error {
  override readonly name = 'VendorRejectedError';
  constructor(
    message: string,
    readonly status: number,
    readonly vendorCode?: string,
  ) {
    super(message);
  }
}

export interface VendorConnection {
  baseUrl: string;
  apiKey: string;
}
