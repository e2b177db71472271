/**
 * Why an action could not run, typed by cause. No Temporal imports: the class name is the failure type
 * Temporal records for a plain error thrown from an activity (`error.constructor.name`), so a retry policy's
 * `nonRetryableErrorTypes` can name these classes, and an activity may also map `nonRetryable` onto
 * `ApplicationFailure.nonRetryable(message, type)`.
 */

/** Base class: `type` is the class name; `nonRetryable` says whether running the action again can help. */
export class ActionError extends Error {
  /** The failure type: the class name (`UnknownActionType`, `InvalidPayload`, `UnknownTask`, …). */
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

/** `modify_task` named a task the task list does not have. */
export class UnknownTask extends ActionError {
  constructor(message: string) {
    super(message, true);
  }
}

/** An idempotency key already applied by a different action type: a caller bug, never a retry. */
export class IdempotencyConflict extends ActionError {
  constructor(message: string) {
    super(message, true);
  }
}

/** The task list stayed locked by another live process for longer than the lock timeout; retrying may help. */
export class TaskListBusy extends ActionError {
  constructor(message: string) {
    super(message, false);
  }
}

/**
 * The task list file is not a task list (bad JSON or shape). Treadle writes it atomically, so this comes from
 * a hand edit; retrying does not fix it, a person does.
 */
export class TaskListUnreadable extends ActionError {
  constructor(message: string) {
    super(message, true);
  }
}
