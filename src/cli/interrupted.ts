/** The wait of the commands that serve until stopped (`treadle ui`, `dev`, `demo`); light, so any command may load it. */

/** Resolves on the first Ctrl-C or SIGTERM. */
export function interrupted(): Promise<void> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
}
