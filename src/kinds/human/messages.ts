/** The human kind's message, handled by the work item that holds the request (issue 40). */
import { defineUpdate } from '@temporalio/workflow';
import type { HumanResponded, HumanResponse } from './shapes';

/**
 * The person's output for a waiting `human` stage (or its rejection): validated, so an answer for a stage that
 * does not wait, or for another attempt, is refused to the caller and never enters history.
 */
export const respondHumanUpdate = defineUpdate<HumanResponded, [HumanResponse]>('respondHuman');
