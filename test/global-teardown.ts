/** Stops the dev server the global setup started. */
export default async function globalTeardown(): Promise<void> {
  await globalThis.__TREADLE_TEST_SERVER__?.stop();
}
