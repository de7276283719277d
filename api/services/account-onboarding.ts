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
   * already signs in elsewhere, and then no account is created). */
  async createAccount(input: { name: string; balanceMicros: number; signIn?: ConsoleSignIn }): Promise<{ account: AccountWithTotals; consoleEmail: string | null }> {
    const accountId = newId('acct');
    if (!input.signIn) {
      return { account: await this.stores.accounts.create({ id: accountId, name: input.name, balanceMicros: input.balanceMicros }), consoleEmail: null };
    }
    // The email is reserved first: its unique insert is atomic even on FerretDB, so two
    // requests for the same email cannot both end up with an account.
    const email = normaliseEmail(input.signIn.email);
    const passwordHash = await hashPassword(input.signIn.password);
    if ((await this.stores.credentials.insert({ email, accountId, passwordHash })) === 'taken') throw emailTaken(email);
    try {
      return { account: await this.stores.accounts.create({ id: accountId, name: input.name, balanceMicros: input.balanceMicros }), consoleEmail: email };
    } catch (error) {
      await this.stores.credentials.collection.deleteOne({ _id: email, account_id: accountId }).catch(() => {});
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

function emailTaken(email: string): GatewayError {
  return new GatewayError('conflict', `The email '${email}' already signs in to another account.`, 'console_email');
}
