/**
 * The `data-testid` values of the review inbox's page, agreed between the page and its browser tests
 * (test/browser/): a test finds what a person sees by these, not by CSS classes or text that may change.
 */
export const TEST_IDS = {
  /** The inbox list. */
  decisionRow: 'decision-row',
  decisionCount: 'decision-count',
  filterKind: 'filter-kind',
  filterPipeline: 'filter-pipeline',
  filterReviewers: 'filter-reviewers',
  filterAge: 'filter-age',
  filterText: 'filter-text',
  emptyState: 'empty-state',
  /** A row's mark for a decision past its deadline (`review_sla`). */
  overdueBadge: 'overdue-badge',
  /** A row's mark for a decision addressed to groups the reviewer is in none of (set by the page's script). */
  readOnlyBadge: 'read-only-badge',
  selectRow: 'select-row',
  selectAll: 'select-all',
  batchApprove: 'batch-approve',
  batchReject: 'batch-reject',
  batchReason: 'batch-reason',
  /** The detail view. */
  stageTable: 'stage-table',
  capacityWaits: 'capacity-waits',
  attempt: 'attempt',
  artefact: 'artefact',
  diffA: 'diff-a',
  diffB: 'diff-b',
  diffShow: 'diff-show',
  diffView: 'diff-view',
  /** An attempt's verdict as text, its feedback when it differs, and each failed criterion in them. */
  verdict: 'verdict',
  feedback: 'feedback',
  criterion: 'criterion',
  webUiLink: 'web-ui-link',
  actionApprove: 'action-approve',
  actionApproveAttempt: 'action-approve-attempt',
  actionReject: 'action-reject',
  rejectReason: 'reject-reason',
  actionEdit: 'action-edit',
  editor: 'editor',
  editorError: 'editor-error',
  editorSubmit: 'editor-submit',
  guidance: 'guidance',
  actionGuidance: 'action-guidance',
  actionResume: 'action-resume',
  actionAbandon: 'action-abandon',
  /** A human stage's form (issue 40). */
  humanForm: 'human-form',
  humanFeedback: 'human-feedback',
  humanFormError: 'human-form-error',
  humanFormSubmit: 'human-form-submit',
  /** Request changes: the note (required) and its button. */
  changesNote: 'changes-note',
  actionRequestChanges: 'action-request-changes',
  /** Cancel the decision's work item (issue 40): the optional reason and the button (asks to confirm). */
  cancelReason: 'cancel-reason',
  actionCancelItem: 'action-cancel-item',
  /** Fork the decision's work item (issue 42): the stage, the changed settings and the button. */
  forkFrom: 'fork-from',
  forkSettings: 'fork-settings',
  actionForkItem: 'action-fork-item',
  /** Notices: decided, already decided by someone else, errors. */
  notice: 'notice',
  /** Why a decision for reviewer groups the reviewer is not in is shown without answer forms. */
  readOnly: 'read-only',
  /** Evaluations (issue 42): a run in the list, the two charts, each bar, each case's row. */
  evalRunRow: 'eval-run-row',
  evalPassChart: 'eval-pass-chart',
  evalCostChart: 'eval-cost-chart',
  evalBar: 'eval-bar',
  evalCaseRow: 'eval-case-row',
  /** Login. */
  loginToken: 'login-token',
  loginSubmit: 'login-submit',
} as const;
