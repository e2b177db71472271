/** Every test process logs only SDK errors; activity failures the tests provoke on purpose stay quiet. */
import { DefaultLogger, Runtime } from '@temporalio/worker';

Runtime.install({ logger: new DefaultLogger('ERROR') });
