/**
 * `treadle blobs gc` on the real server (issue 26 §6, bounded growth): a blob an execution's history references
 * survives, however old, and so does one referenced only from inside such a blob; an old unreferenced blob goes; a
 * young unreferenced one survives the grace period; `--dry-run` lists and deletes nothing; the input a schedule holds
 * by reference survives, however old, though no item of the schedule has run yet.
 */
import { mkdtempSync, utimesSync, existsSync } from 'node:fs';
import path from 'node:path';
import { Registry } from '../../src/activities/registry';
import { FileBlobStore, storeJson } from '../../src/storage/blob-store';
import { eventually, startHarness, type Harness } from '../support/harness';
import { runTreadle } from '../support/cli';

let h: Harness;
beforeAll(async () => {
  const registry = new Registry().stage('big_artefact', async () => ({
    outcome: 'completed',
    artefact: { text: 'x'.repeat(5_000) },
  }));
  const blobs = new FileBlobStore(mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'gc-blobs-')));
  h = await startHarness({ registry, blobs, blobThresholdBytes: 1_000 });
});
afterAll(async () => {
  await h?.shutdown();
});

const fileOf = (ref: string): string => {
  const hex = ref.slice('sha256:'.length);
  return path.join(h.blobs.dir, hex.slice(0, 2), hex.slice(2));
};
/** Makes a blob look stored two days ago. */
const age = (ref: string): void => {
  const then = new Date(Date.now() - 2 * 86_400_000);
  utimesSync(fileOf(ref), then, then);
};

it('keeps referenced and young blobs, deletes old unreferenced ones, and deletes nothing on a dry run', async () => {
  const inner = (await h.blobs.put(Buffer.from(`inner ${h.taskQueue}`), 'text/plain', 'inner')).ref;
  const outer = await storeJson(h.blobs, { next: inner }, 'outer'); // referenced by the item's input only
  const oldOrphan = (await h.blobs.put(Buffer.from(`old ${h.taskQueue}`), 'text/plain', 'old')).ref;
  const youngOrphan = (await h.blobs.put(Buffer.from(`young ${h.taskQueue}`), 'text/plain', 'young')).ref;

  const id = h.id('gc');
  await h.client.start({ name: 'gc', stages: [{ name: 'big', run: 'big_artefact' }] }, { doc: outer }, { id });
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  const artefact = (await h.client.getState(id)).stages.big!.artefact as { ref: string };
  expect(artefact.ref).toMatch(/^sha256:/);
  for (const ref of [inner, outer, oldOrphan, artefact.ref]) age(ref);

  const dry = await runTreadle(h, ['blobs', 'gc', '--dry-run', '--grace', '1h']);
  expect(dry).toMatchObject({ code: 0, stderr: '' });
  expect(dry.stdout).toMatch(new RegExp(`^${oldOrphan}  \\d+ B  stored `, 'm'));
  expect(dry.stdout).toMatch(
    /^would delete 1 unreferenced blobs \(\d+ B\); kept \d+ referenced \(.*\) and 1 younger than 1h/m,
  );
  for (const ref of [inner, outer, oldOrphan, youngOrphan, artefact.ref]) expect(existsSync(fileOf(ref))).toBe(true);

  const gc = await runTreadle(h, ['blobs', 'gc', '--grace', '1h']);
  expect(gc).toMatchObject({ code: 0, stderr: '' });
  expect(gc.stdout).toMatch(/^deleted 1 unreferenced blobs/);
  expect(existsSync(fileOf(oldOrphan))).toBe(false);
  for (const ref of [inner, outer, youngOrphan, artefact.ref]) expect(existsSync(fileOf(ref))).toBe(true);
  expect(await h.client.readArtefact(artefact as never)).toEqual({ text: 'x'.repeat(5_000) });
}, 120_000);

it('keeps the input a schedule holds by reference, though none of its items has run', async () => {
  const name = `gc-${h.taskQueue}`;
  const text = 'z'.repeat(5_000);
  try {
    await h.client.schedules.create(
      name,
      { name: 'gc-scheduled', stages: [{ name: 'only', run: 'scripted' }] },
      {
        cron: '0 0 1 1 * 2099',
        input: { text },
      },
    );
    const action = (await h.temporal.schedule.getHandle(name).describe()).action;
    const { ref } = (action.args as [{ input: { ref: string } }])[0].input;
    expect(ref).toMatch(/^sha256:/);
    age(ref);
    // The gc lists schedules through visibility, which follows a create by a moment.
    await eventually(async () => ((await h.client.schedules.list()).some((s) => s.name === name) ? true : undefined));
    const gc = await runTreadle(h, ['blobs', 'gc', '--grace', '1h']);
    expect(gc).toMatchObject({ code: 0, stderr: '' });
    expect(existsSync(fileOf(ref))).toBe(true);
  } finally {
    await h.client.schedules.delete(name).catch(() => undefined);
  }
}, 60_000);
