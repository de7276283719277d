import type { RateLimitBlockStore } from '../../../store/rate-limit-blocks.ts';
import type { LimitKind } from './limit-answers.ts';

// One key's allowance of one kind (requests or tokens) for one minute, as this process sees it.
// The minute's limit is cut into blocks of `blockSize` units, numbered from 0; this process
// claims blocks in order through the store (a unique insert each, so no block is ever shared)
// and spends them locally. The store is asked once per block, never per request, and the next
// block is claimed in the background when the current one is half spent.
//
// Two processes together can never spend more than the limit. What they can do is strand the
// unspent rest of a block each when the limit is hit, so up to (processes × (blockSize − 1))
// units of a busy minute go unused; blocks are a tenth of the limit to keep that small.

/** A rate-limit window: one UTC minute, numbered from the epoch. */
export const WINDOW_MS = 60_000;

/** Names a key's allowance of one kind, for one minute, under one limit (a changed limit is a
 * new allowance, which starts past what was used under the old one); its blocks are named
 * after it. */
export function windowAllowanceId(kind: LimitKind, keyId: string, window: number, limit: number): string {
  return `${kind}:${keyId}:${window}:${limit}`;
}

export class WindowAllowance {
  /** Units in claimed blocks not yet spent; negative while tokens already used are unpaid. */
  private available = 0;
  /** Every block below this index is claimed by some process. */
  private nextIndex = 0;
  private exhausted = false;
  private claiming: Promise<boolean> | null = null;
  /** Times catchUp() ran: a claim that was out meanwhile must not undo it. */
  private catchUps = 0;
  /** Units of block `nextIndex` used under the key's limit before this one (see the
   * constructor), until that block is claimed or lost. */
  private usedOfNextBlock = 0;

  readonly id: string;
  /** Names the key's allowances of this kind and minute, whatever their limit. */
  readonly minuteId: string;
  readonly endsAt: number;
  readonly blockSize: number;
  /** A call admitted or spent through it (one claimed ahead is not used until then). */
  used = false;

  constructor(
    private readonly store: RateLimitBlockStore,
    readonly kind: LimitKind,
    readonly keyId: string,
    readonly window: number,
    readonly limit: number,
    /** Units of this minute used under the key's limit before this one: an operator who
     * changes a limit mid-minute (lowers it to stop abuse, say) does not hand out a fresh one.
     * The new limit's first blocks that they fill count as gone, and the block they end in
     * counts as that much spent when this process claims it: a limit raised from 2 to 1,000
     * after 2 calls gives 998 more, not the 900 a whole skipped block would leave. */
    unitsUsedBefore = 0,
  ) {
    this.id = windowAllowanceId(kind, keyId, window, limit);
    this.minuteId = `${kind}:${keyId}:${window}`;
    this.endsAt = (window + 1) * WINDOW_MS;
    this.blockSize = Math.max(1, Math.ceil(limit / 10));
    this.nextIndex = Math.floor(unitsUsedBefore / this.blockSize);
    this.usedOfNextBlock = unitsUsedBefore - this.nextIndex * this.blockSize;
  }

  /** Units of this minute used, as far as this process can tell: every block below the next it
   * would try is claimed by some process (an earlier limit's used units included), less what
   * this process holds unspent. */
  get usedUnits(): number {
    return Math.max(0, Math.min(this.limit, this.countedUnits) - this.available);
  }

  /** Units of the minute in blocks some process claimed, and used of the next one before this
   * allowance (the constructor's `unitsUsedBefore`). */
  private get countedUnits(): number {
    return this.nextIndex * this.blockSize + this.usedOfNextBlock;
  }

  /** Counts `unitsUsed` of this minute (used under another limit since this allowance was last
   * the key's) as gone: blocks that cover them are skipped, and what this process holds unspent
   * shrinks to what the limit leaves. */
  catchUp(unitsUsed: number): void {
    this.catchUps++;
    // Past what this allowance already counts as claimed or used: the blocks the use fills are
    // gone, and the one it ends in is that much spent (as in the constructor).
    if (unitsUsed > this.countedUnits) {
      this.nextIndex = Math.floor(unitsUsed / this.blockSize);
      this.usedOfNextBlock = unitsUsed - this.nextIndex * this.blockSize;
    }
    const room = Math.max(0, Math.min(this.limit, this.nextIndex * this.blockSize) - unitsUsed);
    // What this process spent ahead of its blocks (a debt) is within `unitsUsed` already.
    this.available = Math.min(Math.max(this.available, 0), room);
  }

  /** Units left in this minute for everyone, as far as this process can tell. */
  get remaining(): number {
    const unclaimed = Math.max(0, this.limit - this.countedUnits);
    return Math.max(0, Math.min(this.limit, unclaimed + this.available));
  }

  /** Spends `amount` units if they are at hand now; false (nothing spent) when a block would
   * have to be claimed first. */
  takeAtHand(amount: number): boolean {
    if (this.available < amount) return false;
    this.available -= amount;
    this.claimAheadIfLow();
    return true;
  }

  /** True when `amount` units are at hand now. */
  hasAtHand(amount: number): boolean {
    return this.available >= amount;
  }

  /** Waits until `amount` units are at hand (claiming blocks), then spends them; false when
   * the minute's blocks are all gone. */
  async take(amount: number): Promise<boolean> {
    // The check and the spending must happen in one synchronous step after the last await:
    // every waiter wakes from the same claim, and each must see what the others took.
    while (this.available < amount) {
      if (!(await this.claimNext())) return false;
    }
    return this.takeAtHand(amount);
  }

  /** Waits until a unit is at hand (claiming blocks), then spends `amount`, beyond what is at
   * hand if need be (see spend()); false when the minute's blocks are all gone. */
  async spendOnceAvailable(amount: number, onError: (error: unknown) => void): Promise<boolean> {
    // As in take(): checked and spent in one synchronous step, so calls waiting on the same
    // claim see what the ones before them spent.
    while (this.available < 1) {
      if (!(await this.claimNext())) return false;
    }
    this.spend(amount, onError);
    return true;
  }

  /** Claims this minute's first block ahead of its start, so the minute's first calls find
   * units at hand; errors are the caller's to report. */
  claimFirstBlockAhead(): Promise<boolean> {
    return this.available > 0 ? Promise.resolve(true) : this.claimNext();
  }

  /** Spends units after the fact (the tokens a call used); the debt is paid from blocks
   * claimed in the background, and when none are left the minute is used up. A negative amount
   * gives back units spent before (a call counted for more tokens than it used). */
  spend(amount: number, onError: (error: unknown) => void): void {
    this.available -= amount;
    if (this.available < 0) {
      void (async () => {
        while (this.available < 0 && (await this.claimNext()));
      })().catch(onError);
    } else {
      this.claimAheadIfLow(onError);
    }
  }

  private claimAheadIfLow(onError: (error: unknown) => void = () => {}): void {
    if (!this.exhausted && !this.claiming && this.available < this.blockSize / 2) this.claimNext().catch(onError);
  }

  private claimNext(): Promise<boolean> {
    if (this.exhausted) return Promise.resolve(false);
    if (!this.claiming) {
      this.claiming = this.claimFirstFree().finally(() => {
        this.claiming = null;
      });
    }
    return this.claiming;
  }

  private async claimFirstFree(): Promise<boolean> {
    const blocks = Math.ceil(this.limit / this.blockSize);
    while (this.nextIndex < blocks) {
      const index = this.nextIndex;
      const catchUps = this.catchUps;
      // Kept a minute past the window, so a late claim can never reuse a swept id.
      const won = await this.store.claim(`${this.id}:${index}`, new Date(this.endsAt + 60_000));
      if (catchUps !== this.catchUps) {
        // The key's limit came back to this one while the claim was out, and the minute's use
        // was counted past it: the block counts as gone with the rest (at worst a block that was
        // not is lost to the key for the minute). The caller asks again if it needs more.
        if (index + 1 > this.nextIndex) [this.nextIndex, this.usedOfNextBlock] = [index + 1, 0];
        if (won) return true;
        continue;
      }
      this.nextIndex = index + 1;
      // Claimed or lost, the block that earlier use ended in is behind this process now.
      const usedBefore = this.usedOfNextBlock;
      this.usedOfNextBlock = 0;
      if (won) {
        // Never below nothing: earlier use past a short last block leaves it empty.
        this.available += Math.max(0, Math.min(this.blockSize, this.limit - index * this.blockSize) - usedBefore);
        return true;
      }
    }
    this.exhausted = true;
    return false;
  }
}
