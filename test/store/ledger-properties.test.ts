import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { Ledger, type LedgerEntry, type LedgerOutcome } from '../../store/ledger.ts';
import { testDatabase } from '../helpers/engines.ts';

// Property: however the hold and settle attempts of several tasks on one account interleave,
// run concurrently, and are duplicated (a stale activity attempt beside its retry, or landing
// after the task was settled), the account ends at its opening balance minus the prices of the
// tasks that succeeded, holds nothing, and its balance never went negative on the way.
//
// Each run schedules a fresh account against the suite's real FerretDB. The schedule respects
// what Temporal guarantees a workflow (and the chat proxy guarantees a call): a task's first
// settlement is issued only after its first hold attempt has answered, and only if the money is
// held; everything else (other tasks, duplicates of either step, a settlement "the other way")
// may land anywhere. Ops that share a slot run concurrently.

const SEED = 61_117;
const RUNS = 20;

interface TaskPlan {
  priceMicros: number;
  succeeds: boolean;
  /** Slots, relative to the first hold, of extra hold attempts. */
  holdRepeats: number[];
  /** Slot gap between the first hold and the first settlement. */
  settleAfter: number;
  /** Slots, relative to the first settlement, of extra settlement attempts. */
  settleRepeats: number[];
  /** Also try the opposite settlement afterwards (capture after a release, or the reverse). */
  contradict: boolean;
}

const taskPlan = fc.record({
  priceMicros: fc.integer({ min: 1, max: 400_000 }),
  succeeds: fc.boolean(),
  holdRepeats: fc.array(fc.integer({ min: 0, max: 8 }), { maxLength: 3 }),
  settleAfter: fc.integer({ min: 1, max: 6 }),
  settleRepeats: fc.array(fc.integer({ min: 0, max: 6 }), { maxLength: 3 }),
  contradict: fc.boolean(),
});

const scenario = fc.record({
  openingMicros: fc.integer({ min: 0, max: 1_000_000 }),
  firstHoldSlots: fc.array(fc.integer({ min: 0, max: 6 }), { minLength: 2, maxLength: 5 }),
  tasks: fc.array(taskPlan, { minLength: 5, maxLength: 5 }),
});

type Step = { slot: number; task: number; kind: 'first-hold' | 'hold' | 'first-settle' | 'settle' | 'contradict' };

function scheduleOf(firstHoldSlots: number[], tasks: TaskPlan[]): Step[] {
  const steps: Step[] = [];
  firstHoldSlots.forEach((holdSlot, task) => {
    const plan = tasks[task]!;
    const settleSlot = holdSlot + plan.settleAfter;
    steps.push({ slot: holdSlot, task, kind: 'first-hold' });
    for (const offset of plan.holdRepeats) steps.push({ slot: holdSlot + offset, task, kind: 'hold' });
    steps.push({ slot: settleSlot, task, kind: 'first-settle' });
    for (const offset of plan.settleRepeats) steps.push({ slot: settleSlot + offset, task, kind: 'settle' });
    if (plan.contradict) steps.push({ slot: settleSlot + 7, task, kind: 'contradict' });
  });
  return steps.sort((first, second) => first.slot - second.slot);
}

describe('ledger properties: any interleaving of duplicated holds and settlements', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let ledger: Ledger;
  before(async () => {
    database = await testDatabase('ledger_properties');
    ledger = new Ledger(database.db);
    await Ledger.ensureIndexes(database.db);
  });
  after(() => database.drop());

  it('charges exactly the successful tasks, holds nothing at the end, never goes negative', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(scenario, async ({ openingMicros, firstHoldSlots, tasks }) => {
        const accountId = `acct_property_${run++}_${Date.now()}`;
        const reference = (task: number) => `${accountId}:task${task}`;
        const apply = (task: number, operation: 'hold' | 'capture' | 'release'): Promise<LedgerOutcome> =>
          ledger.apply({ accountId, keyId: 'key_property', reference: reference(task), operation, amountMicros: tasks[task]!.priceMicros });
        if (openingMicros > 0) await ledger.apply({ accountId, keyId: null, reference: `${accountId}:opening`, operation: 'credit', amountMicros: openingMicros });

        const held = new Map<number, boolean>();
        const settlement = (task: number) => (tasks[task]!.succeeds ? 'capture' : 'release');
        const steps = scheduleOf(firstHoldSlots, tasks);
        for (const slot of new Set(steps.map((step) => step.slot))) {
          const batch = steps.filter((step) => step.slot === slot);
          await Promise.all(
            batch.map(async (step) => {
              const isHold = step.kind === 'first-hold' || step.kind === 'hold';
              // After the first hold answered, a task whose money was not held is over: it fails
              // unbilled and nothing of it runs again.
              if (!isHold || step.kind === 'hold') {
                if (held.get(step.task) === false) return;
              }
              if (isHold) {
                const outcome = await apply(step.task, 'hold');
                assert.ok(outcome === 'applied' || outcome === 'insufficient_balance', `hold answered ${outcome}`);
                return;
              }
              const operation = step.kind === 'contradict' ? (settlement(step.task) === 'capture' ? 'release' : 'capture') : settlement(step.task);
              const outcome = await apply(step.task, operation);
              assert.equal(outcome, step.kind === 'contradict' ? 'conflict' : 'applied', `${step.kind} ${operation} of task ${step.task}`);
            }),
          );
          // Whatever the first hold attempt and its concurrent duplicates did is now settled.
          for (const step of batch) {
            if (step.kind === 'first-hold') held.set(step.task, (await ledger.find(accountId, reference(step.task), 'hold')) !== null);
          }
        }

        const charged = firstHoldSlots.map((_, task) => task).filter((task) => held.get(task) && tasks[task]!.succeeds);
        const expectedSpent = charged.reduce((sum, task) => sum + tasks[task]!.priceMicros, 0);
        const totals = await ledger.totals(accountId);
        assert.deepEqual(totals, { balance_micros: openingMicros - expectedSpent, held_micros: 0, spent_micros: expectedSpent });

        const chain = await ledger.entries.find({ account_id: accountId }).sort({ seq: 1 }).toArray();
        chain.forEach((entry: LedgerEntry, index) => {
          assert.equal(entry.seq, index, 'the chain has no gaps');
          assert.ok(entry.balance_micros >= 0 && entry.held_micros >= 0, `seq ${entry.seq} is not negative`);
          assert.equal(entry.balance_micros + entry.held_micros + entry.spent_micros, openingMicros, `seq ${entry.seq} conserves money`);
        });
        for (const [task, wasHeld] of held) {
          const settlements = chain.filter((entry) => entry.reference === reference(task) && (entry.operation === 'capture' || entry.operation === 'release'));
          assert.equal(settlements.length, wasHeld ? 1 : 0, `task ${task} is settled exactly once`);
          assert.equal(chain.filter((entry) => entry.reference === reference(task) && entry.operation === 'hold').length, wasHeld ? 1 : 0, `task ${task} is held once`);
        }
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
  });
});
