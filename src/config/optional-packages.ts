/**
 * The packages Treadle uses for some settings only, which `npm install treadle` does not install (package.json
 * lists them as optional peer dependencies, measured in BENCHMARKS.md "Install size"): the AWS SDK for the S3
 * blob store, node-postgres for a PostgreSQL call log, OpenTelemetry's SDK for tracing. A setting that needs one
 * that is missing is a configuration error (exit 2) naming the package and the command that installs it.
 */
import { configError, type TreadleError } from './errors';

/** What needs optional packages, which ones, and the setting that asks for them (for the error). */
export const OPTIONAL_FEATURES = {
  s3: {
    setting: 'The S3 blob store (TREADLE_BLOB_STORE=s3, or TREADLE_S3_BUCKET set)',
    packages: ['@aws-sdk/client-s3'],
  },
  postgres: {
    setting: 'A PostgreSQL call log (TREADLE_CALL_LOG=postgres://…)',
    packages: ['pg'],
  },
  tracing: {
    setting: 'Tracing (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or createTracing)',
    packages: [
      '@opentelemetry/exporter-trace-otlp-http',
      '@opentelemetry/resources',
      '@opentelemetry/sdk-trace-base',
      '@opentelemetry/sdk-trace-node',
      '@temporalio/interceptors-opentelemetry',
    ],
  },
} as const satisfies Record<string, { setting: string; packages: readonly string[] }>;

/** A feature that needs packages `npm install treadle` leaves out. */
export type OptionalFeature = keyof typeof OPTIONAL_FEATURES;

/**
 * Runs `load` (a `require` or `require.resolve` of one of `feature`'s packages) and returns what it returns; if
 * one of the feature's packages cannot be found, throws {@link missingPackageError} instead. Any other failure
 * (a broken install, an error inside the package) is rethrown as it is.
 */
export function loadOptional<T>(feature: OptionalFeature, load: () => T): T {
  try {
    return load();
  } catch (error) {
    const missing = missingPackageOf(error, OPTIONAL_FEATURES[feature].packages);
    if (missing === undefined) throw error;
    throw missingPackageError(feature, missing);
  }
}

/**
 * The configuration error for a feature whose package `missing` is not installed: one line naming the setting,
 * the package and `npm install` of every package the feature uses, at the versions this Treadle was built with.
 */
export function missingPackageError(feature: OptionalFeature, missing: string): TreadleError {
  const { setting, packages } = OPTIONAL_FEATURES[feature];
  const ranges = peerRanges();
  const specs = packages.map((name) => (ranges[name] ? `${name}@${ranges[name]}` : name));
  return configError(`${setting} needs ${missing}, which is not installed: npm install ${specs.join(' ')}`);
}

/** Which of `packages` a failed `require` could not find (not a module missing inside an installed package). */
function missingPackageOf(error: unknown, packages: readonly string[]): string | undefined {
  if ((error as { code?: unknown } | null)?.code !== 'MODULE_NOT_FOUND') return undefined;
  // Node's message starts "Cannot find module '<specifier>'"; a subpath (`pkg/lib/x`) counts as the package.
  const specifier = /^Cannot find module '([^']+)'/.exec((error as Error).message)?.[1];
  return packages.find((name) => specifier === name || specifier?.startsWith(`${name}/`));
}

/** The version ranges package.json gives its peer dependencies (read only to word an error). */
function peerRanges(): Record<string, string> {
  try {
    // package.json is beside lib/ and src/ (eslint.config.mjs allows `require` in this file, the optional loader).
    return (require('../../package.json') as { peerDependencies?: Record<string, string> }).peerDependencies ?? {};
  } catch {
    return {};
  }
}
