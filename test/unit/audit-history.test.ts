/**
 * The audit of histories recorded before issue 24's summaries (test/replay/histories/before-i24-summaries):
 * contract calls still read as lines of their stage with each round's counts (from their inputs), and
 * approval decisions still name their step (from the requests made earlier in the history).
 */
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { auditHistory } from '../../src/client/audit';

const DIR = path.join(__dirname, '..', 'replay', 'histories', 'before-i24-summaries');
const recorded = (name: string) => historyFromJSON(JSON.parse(readFileSync(path.join(DIR, `${name}.json`), 'utf8')));
const lines = (name: string): string[] =>
  auditHistory(name, recorded(name).events ?? []).map((e) => `${e.kind}|${e.step ?? ''}|${e.message}`);

test('contract calls of an older history are lines of their stage, with the round and its counts', () => {
  const contract = lines('i24-contracts').filter((l) => l.includes('contract '));
  expect(contract).toEqual(
    expect.arrayContaining([
      'step|join|contract left→join round 0: 2 validated, 1 accepted, 1 rejected',
      'step|join|contract left→join round 1: bad-1 revised',
      'step|join|contract left→join round 1: 1 revised, 1 validated, 1 accepted, 0 rejected',
      'step|join|contract left→join round 1: final list: 2 accepted, 0 passed through with warnings',
      'step|join|contract right→join round 0: 2 validated, 0 accepted, 2 rejected',
      'step|join|contract right→join round 1: 2 revised, 2 validated, 2 accepted, 0 rejected',
      'step|join|contract right→join round 1: final list: 2 accepted, 0 passed through with warnings',
    ]),
  );
  expect(lines('i24-contracts').filter((l) => l.includes('treadle.contract'))).toEqual([]);
});

test('approval decisions of an older history name their step', () => {
  const decisions = lines('i24-approvals-decided').filter((l) => / (approved|rejected) by /.test(l));
  expect(decisions).toHaveLength(3);
  for (const l of decisions) expect(l).toMatch(/^approval\|approve\|ap-\S+ (approved|rejected) by /);
  const made = 'step|approve|approve attempt 1 (approval): 3 requests made, waiting for decisions';
  expect(lines('i24-approvals-decided')).toContain(made);
});

test("a loop's resume and abandon name who decided (engine 7's recorded loop)", () => {
  const file = path.join(__dirname, '..', 'replay', 'histories', 'decisions-loop.work.1.json');
  const history = historyFromJSON(JSON.parse(readFileSync(file, 'utf8')));
  const lines = auditHistory('decisions-loop.work.1', history.events ?? []).map((e) => `${e.kind}|${e.message}`);
  expect(lines).toEqual(
    expect.arrayContaining([
      'review|loop resumed by alice (update)',
      'review|loop abandoned by alice: the agent keeps crashing (update)',
    ]),
  );
});
