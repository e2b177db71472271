/**
 * Why an action could not run, typed by cause. No Temporal imports: the class name is the failure type
 * Temporal records for a plain error thrown from an activity (`error.constructor.name`), so a retry policy's
 * `nonRetryableErrorTypes` can name these classes, and an activity may also map `nonRetryable` onto
 * `ApplicationFailure.nonRetryable(message, type)`.
 */

/** Base class: `type` is the class name; `nonRetryable` says whether running the action again can help. */
export class ActionError extends Error {
  /** The failure type: the class name (`UnknownActionType`, `InvalidPayload`, an action's own, …). */
  readonly type: string;
  /** True when retrying with the same input cannot succeed. */
  readonly nonRetryable: boolean;

  constructor(message: string, nonRetryable: boolean) {
    super(message);
    this.type = new.target.name;
    this.name = new.target.name;
    this.nonRetryable = nonRetryable;
  }
}

/** The action type is not registered; the message names the known ones (and a close name). */
export class UnknownActionType extends ActionError {
  constructor(message: string) {
    super(message, true);
  }
}

/** The payload does not match the action type's schema; `problems` are `path: message` each. */
export class InvalidPayload extends ActionError {
  constructor(
    message: string,
    readonly problems: string[],
  ) {
    super(message, true);
  }
}
