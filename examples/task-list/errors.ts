/**
 * Why a task-list action could not run, typed by cause on the core's {@link ActionError}: the class name is
 * the failure type Temporal records, and `nonRetryable` says whether running the action again can help.
 */
import { ActionError } from '../../src/kinds/approval/errors';

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
