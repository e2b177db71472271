/**
 * The modules CLI commands load when they run (issue 7's start time): the SDK client and worker, the bundled
 * examples, the dev server, zod (validation). `scripts/bundle-cli.js` keeps the server ones out of the `validate` bundle by
 * these exact specifiers, so this file stays in src/cli/.
 */
import type * as ClientModule from '../client';
import type * as ConfigModule from '../config';
import type * as ConnectionSettingsModule from '../config/connection-settings';
import type * as PipelineModule from '../kinds/pipeline';
import type * as TemporalCliModule from '../server/temporal-cli';
import type * as WorkerModule from '../worker';
import type * as TracingModule from '../observability/tracing';
import type * as DevModule from './dev';
import type * as LoopFilesModule from '../kinds/loop/worker/files';
import type * as BundledExamplesModule from './bundled-examples';
import type * as InboxModule from '../ui/serve';
import type * as InboxOptionsModule from '../ui/options';
import type * as InboxAuthModule from '../ui/auth';

/* eslint-disable @typescript-eslint/no-require-imports -- deliberate lazy loading: `require` rather than
   `import()`, because a native dynamic import of CommonJS goes through the ESM loader and costs more. */
/** The modules commands load when they run: the SDK client and worker, the dev server, zod (validation). */
export const load = {
  client: (): typeof ClientModule => require('../client'),
  config: (): typeof ConfigModule => require('../config'),
  connectionSettings: (): typeof ConnectionSettingsModule => require('../config/connection-settings'),
  dev: (): typeof DevModule => require('./dev'),
  pipeline: (): typeof PipelineModule => require('../kinds/pipeline'),
  temporalCli: (): typeof TemporalCliModule => require('../server/temporal-cli'),
  worker: (): typeof WorkerModule => require('../worker'),
  tracing: (): typeof TracingModule => require('../observability/tracing'),
  loopFiles: (): typeof LoopFilesModule => require('../kinds/loop/worker/files'),
  bundledExamples: (): typeof BundledExamplesModule => require('./bundled-examples'),
  inbox: (): typeof InboxModule => require('../ui/serve'),
  inboxOptions: (): typeof InboxOptionsModule => require('../ui/options'),
  inboxAuth: (): typeof InboxAuthModule => require('../ui/auth'),
};
/* eslint-enable @typescript-eslint/no-require-imports */
