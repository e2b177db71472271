/**
 * Every message of Treadle's workflows in one place, for the client (src/client.ts, src/client/), which
 * imports them from here. Workflow code imports them from their homes: workflow-kit/messages.ts (review,
 * state, events) and each kind's messages.ts. Kept until the client's imports point there.
 */
export * from '../workflow-kit/messages';
export * from '../kinds/approval/messages';
export * from '../kinds/tdd/messages';
export * from '../kinds/loop/messages';
