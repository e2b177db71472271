/**
 * The modules CLI commands load when they run (issue 7's start time): the SDK client and worker, the bundled
 * examples, the dev server, zod (validation). `scripts/bundle-cli.js` keeps the server ones out of the `validate` bundle by
 * these exact specifiers, so this file stays in src/cli/. The CLI's one place for `require` (eslint.config.mjs
 * allows it in `lazy-modules.ts` files; docs/architecture.md "Lazy loading").
 */
import type * as ClientModule from '../client';
import type * as ConfigModule from '../config';
import type * as ConnectionSettingsModule from '../config/connection-settings';
import type * as PipelineModule from '../kinds/pipeline';
import type * as TemporalCliModule from '../server/temporal-cli';
import type * as ServerToolsModule from '../server/server-tools';
import type * as ServerConfigModule from '../server/server-config';
import type * as WorkerModule from '../worker';
import type * as TracingModule from '../observability/tracing';
import type * as DevModule from './dev';
import type * as LoopFilesModule from '../kinds/loop/worker/files';
import type * as BundledExamplesModule from './bundled-examples';
import type * as InboxModule from '../ui/serve';
import type * as InboxOptionsModule from '../ui/options';
import type * as InboxAuthModule from '../ui/auth';
import type * as ShapesModule from '../model/shapes';
import type * as SpecLinesModule from '../pipelines/spec-lines';
import type * as BlobGcModule from '../storage/blob-gc';
import type * as StorageModule from '../storage';
import type * as ProtoModule from '@temporalio/proto';
import type * as NotifySettingsModule from '../notify/worker/settings-file';
import type * as NotifySampleModule from '../notify/worker/sample';
import type * as EvalRunnerModule from '../client/eval-runner';
import type * as EvalScorersModule from '../client/eval-scorers';

/**
 * The modules commands load when they run: the SDK client and worker, the dev server, zod (validation). `require`
 * rather than `import()`, because a native dynamic import of CommonJS goes through the ESM loader and costs more.
 * @internal Left out of the published declarations (tsconfig.build.json `stripInternal`), which must name no
 * optional package; the table is no API.
 */
export const load = {
  client: (): typeof ClientModule => require('../client'),
  config: (): typeof ConfigModule => require('../config'),
  connectionSettings: (): typeof ConnectionSettingsModule => require('../config/connection-settings'),
  dev: (): typeof DevModule => require('./dev'),
  pipeline: (): typeof PipelineModule => require('../kinds/pipeline'),
  temporalCli: (): typeof TemporalCliModule => require('../server/temporal-cli'),
  serverTools: (): typeof ServerToolsModule => require('../server/server-tools'),
  /** `treadle server-config` alone. */
  serverConfig: (): typeof ServerConfigModule => require('../server/server-config'),
  worker: (): typeof WorkerModule => require('../worker'),
  tracing: (): typeof TracingModule => require('../observability/tracing'),
  loopFiles: (): typeof LoopFilesModule => require('../kinds/loop/worker/files'),
  bundledExamples: (): typeof BundledExamplesModule => require('./bundled-examples'),
  inbox: (): typeof InboxModule => require('../ui/serve'),
  inboxOptions: (): typeof InboxOptionsModule => require('../ui/options'),
  inboxAuth: (): typeof InboxAuthModule => require('../ui/auth'),
  /** The schemas (zod, ~60 ms): `treadle pipelines` renders a table and never needs them. */
  shapes: (): typeof ShapesModule => require('../model/shapes'),
  /** Placing `validate`'s problems on lines: only when there are problems. */
  specLines: (): typeof SpecLinesModule => require('../pipelines/spec-lines'),
  /** `treadle blobs gc` alone. */
  blobGc: (): typeof BlobGcModule => require('../storage/blob-gc'),
  storage: (): typeof StorageModule => require('../storage'),
  /** Temporal's protobuf types: the SDK client has loaded them by the time a command asks. */
  proto: (): typeof ProtoModule => require('@temporalio/proto'),
  /** `treadle notify test`: the notifications file, and the signed sample posted to its webhooks. */
  notifySettings: (): typeof NotifySettingsModule => require('../notify/worker/settings-file'),
  notifySample: (): typeof NotifySampleModule => require('../notify/worker/sample'),
  /** `treadle eval run`: the variants' checks before connecting, and the scorer (the judge loads the Anthropic SDK). */
  evalRunner: (): typeof EvalRunnerModule => require('../client/eval-runner'),
  evalScorers: (): typeof EvalScorersModule => require('../client/eval-scorers'),
};
