import { createHash } from 'node:crypto';
import { z } from 'zod';
import { atLeastCharacters, atMostCharacters } from '../../core/characters.ts';
import { GatewayError } from '../../core/errors.ts';
import { newId } from '../../core/ids.ts';
import { hashPassword } from '../../core/passwords.ts';
import type { AccountStore, AccountWithTotals } from '../../store/accounts.ts';
import { normaliseEmail, type ConsoleCredentialStore } from '../../store/console-credentials.ts';

// Creating accounts and their console sign-ins, shared by the admin API and the operator pages
// of the console so both follow the same rules.

/** The rules of a console sign-in, for every form and body that sets one. */
export const consoleEmail = z.string().trim().toLowerCase().pipe(z.email('must be an email address').max(254));
// Counted in characters, as the OpenAPI document counts them (an emoji is one, not two).
export const consolePassword = atLeastCharacters(atMostCharacters(z.string(), 256, 'must be at most 256 characters'), 12, 'must be at least 12 characters');

export interface ConsoleSignIn {
  email: string;
  password: string;
}

export class AccountOnboarding {
  constructor(private readonly stores: { accounts: AccountStore; credentials: ConsoleCredentialStore }) {}

  /** Creates an account, with a console sign-in when one is given (409 conflict when its email
   * already signs in elsewhere, and then no account is created).
   *
   * Under an Idempotency-Key the account's id derives from the key, so a retry of a creation
   * that timed out (or whose process died halfway) finds the account the first made: it is
   * finished where it stopped and returned with `replayed`, as it is now (its balance, its
   * webhook secret). A retry that asks for another name, opening balance or email is a 422 and
   * changes nothing; its password is not compared (only its hash is kept, salted), so the first
   * one stands. The key never expires: the id it names is the account's for good. */
  async createAccount(input: { name: string; balanceMicros: number; signIn?: ConsoleSignIn; idempotencyKey?: string }): Promise<{ account: AccountWithTotals & { replayed?: true }; consoleEmail: string | null }> {
    const email = input.signIn ? normaliseEmail(input.signIn.email) : null;
    const keyed = input.idempotencyKey === undefined ? undefined : { id: accountIdFor(input.idempotencyKey), fingerprint: creationFingerprint(input.name, input.balanceMicros, email) };
    const accountId = keyed?.id ?? newId('acct');
    const create = async () => {
      const created = keyed ? await this.stores.accounts.create({ ...keyed, name: input.name, balanceMicros: input.balanceMicros }) : await this.stores.accounts.create({ id: accountId, name: input.name, balanceMicros: input.balanceMicros });
      if (created === 'mismatch') throw creationMismatch();
      return created;
    };
    // Made under this key already: this creation retried (finished and replayed), or another
    // request under the key (a 422). Either way its sign-ins stay as they are.
    if (keyed && (await this.stores.accounts.findDocument(accountId))) return { account: await create(), consoleEmail: email };
    let reservedHere = false;
    if (email !== null && input.signIn) {
      // The email is reserved first: its unique insert is atomic even on FerretDB, so two
      // requests for the same email cannot both end up with an account. Held by this very id,
      // a try of this creation under the same key reserved it (one at the same time, or one
      // that died before the account was made).
      const passwordHash = await hashPassword(input.signIn.password);
      reservedHere = (await this.stores.credentials.insert({ email, accountId, passwordHash })) === 'created';
      if (!reservedHere && (!keyed || (await this.stores.credentials.find(email))?.account_id !== accountId)) throw emailTaken(email);
    }
    // A try under the same key that died before the account was made may have reserved another
    // email for it: that one must not sign in to an account made without it.
    if (keyed) await this.stores.credentials.collection.deleteMany({ account_id: accountId, ...(email === null ? {} : { _id: { $ne: email } }) });
    try {
      return { account: await create(), consoleEmail: email };
    } catch (error) {
      // Only this try's own reservation: when another request under the key made the account
      // meanwhile (a 422), or when no account came of it. One this try made (its opening credit
      // failed, or the insert's answer was lost) keeps its sign-in.
      const mismatch = error instanceof GatewayError && error.code === 'idempotency_mismatch';
      if (reservedHere && (mismatch || !(await this.stores.accounts.exists(accountId).catch(() => true)))) {
        await this.stores.credentials.collection.deleteOne({ _id: email!, account_id: accountId }).catch(() => {});
      }
      throw error;
    }
  }

  /** Adds a console sign-in to an account, or sets a new password for one it already has. */
  async setSignIn(accountId: string, signIn: ConsoleSignIn): Promise<'created' | 'password_changed'> {
    const email = normaliseEmail(signIn.email);
    const passwordHash = await hashPassword(signIn.password);
    if ((await this.stores.credentials.insert({ email, accountId, passwordHash })) === 'created') return 'created';
    if (await this.stores.credentials.setPassword({ email, accountId, passwordHash })) return 'password_changed';
    throw emailTaken(email);
  }
}

/** The account id an Idempotency-Key names: as random to anyone without the key as newId's. */
export function accountIdFor(idempotencyKey: string): string {
  return `acct_${createHash('sha256').update(`admin:create-account:${idempotencyKey}`).digest('base64url').slice(0, 16)}`;
}

function creationFingerprint(name: string, balanceMicros: number, email: string | null): string {
  return createHash('sha256').update(JSON.stringify([name, balanceMicros, email])).digest('base64url');
}

function creationMismatch(): GatewayError {
  return new GatewayError('idempotency_mismatch', 'This Idempotency-Key already created an account with another name, opening balance or email. Use a new key for a new account.', 'Idempotency-Key');
}

function emailTaken(email: string): GatewayError {
  return new GatewayError('conflict', `The email '${email}' already signs in to another account.`, 'console_email');
}
