/**
 * The error every `TreadleClient` call and CLI command reports to users, in a module of its own with no SDK
 * import, so that code read at CLI start (the connection settings) can throw it cheaply.
 */

/** A Treadle error meant for users: one line that says what went wrong. */
export class TreadleError extends Error {
  constructor(
    message: string,
    readonly code:
      | 'not_found'
      | 'invalid_pipeline'
      | 'invalid_review'
      | 'unreachable'
      /** The server is there but could not do the call now (restarting, or its database unreachable): try again. */
      | 'server_unavailable'
      | 'invalid_input'
      | 'failed'
      /** No worker polls the task queue of the item asked (queries and updates need one). */
      | 'no_worker'
      /** A setting that cannot work as given (a Temporal connection setting, a profile): fix the setting. */
      | 'config',
    readonly problems: string[] = [],
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'TreadleError';
  }
}

/** A setting that cannot work as given (code `config`): the CLI and `treadle worker` exit 2 for these. */
export function configError(message: string): TreadleError {
  return new TreadleError(message, 'config');
}

/**
 * A decision refused because someone decided first (code `invalid_review`), with how they decided as far as it is
 * known: `TreadleClient.decide` answers it as `already_decided`.
 */
export class AlreadyDecidedError extends TreadleError {
  constructor(
    message: string,
    readonly decided: { by?: string; outcome?: string; at?: string },
  ) {
    super(message, 'invalid_review');
    this.name = 'AlreadyDecidedError';
  }
}
