/**
 * The tools an agent gets to act in its worktree: `read_file`, `write_file`, `list_files`, `delete_file`
 * and, when a test command is allowed, `run_tests`. The tools only check and describe; every path goes
 * through a {@link WorktreeAccess}, whose real implementation ({@link worktreeAccess}) is the path-checked
 * file access of `./worktree-files.ts` (`..`, absolute paths, `.git` and symlinks out of the
 * worktree refused; writes and deletions of read-only paths refused), so tests can inject their own.
 */
import { z } from 'zod';
import {
  deleteFileInside,
  listFilesInside,
  PathEscapeError,
  readFileInside,
  ReadOnlyPathError,
  writeFileInside,
} from './worktree-files';
import type { AgentTool, JsonSchemaObject } from './types';

/** A file read by `read_file` is refused past this size (the model's context is the limit, not the disk). */
export const MAX_TOOL_READ_BYTES = 256 * 1024;
/** `list_files` lists at most this many files. */
export const MAX_TOOL_LISTED_FILES = 1_000;
/** `run_tests` shows this much of the end of the test output (the failures are at the end). */
const MAX_TEST_OUTPUT_CHARS = 30_000;

/** What a test run tells the model. */
export interface ToolTestRun {
  passed: boolean;
  /** One line, e.g. `3 passed, 1 failed (node --test, exit 1, 412 ms)`. */
  summary: string;
  output: string;
}

/**
 * The operations behind the tools, bound to one worktree. Each rejects with an error the model may read:
 * a refused path, a read-only file, a file that is not there.
 */
export interface WorktreeAccess {
  readFile(path: string): Promise<string>;
  writeFile(path: string, content: string): Promise<void>;
  /** Files under `path` (`.` for all), relative to the worktree, sorted. */
  listFiles(path: string): Promise<string[]>;
  deleteFile(path: string): Promise<void>;
  /** Runs the test command on `files` (the whole suite when empty); without it there is no `run_tests` tool. */
  runTests?(files: string[], signal?: AbortSignal): Promise<ToolTestRun>;
}

/** Options of {@link worktreeAccess}. */
export interface WorktreeAccessOptions {
  /** Files, or folders whose contents are all read-only: writes and deletions are refused. */
  readOnly?: string[];
  /** The test runner, already bound to the worktree and an allowed command (see `activities/test-command.ts`). */
  runTests?: WorktreeAccess['runTests'];
  /** Told of every path refused (outside the worktree, in .git, read-only), e.g. `write_file: x is read-only`. */
  onRefused?: (refusal: string) => void;
}

/** The real {@link WorktreeAccess} of `worktree`: the path-checked helpers of `worktree-files.ts`. */
export function worktreeAccess(worktree: string, options: WorktreeAccessOptions = {}): WorktreeAccess {
  const readOnly = options.readOnly ?? [];
  const onRefused = options.onRefused;
  // A refusal is reported, then thrown on as before: the model reads it as the tool's error.
  const reported = <T>(tool: string, work: () => Promise<T>): Promise<T> =>
    work().catch((error: unknown) => {
      if (onRefused && (error instanceof PathEscapeError || error instanceof ReadOnlyPathError))
        onRefused(`${tool}: ${error.message}`);
      throw error;
    });
  return {
    readFile: (path) => reported('read_file', () => readFileInside(worktree, path, { maxBytes: MAX_TOOL_READ_BYTES })),
    writeFile: (path, content) => reported('write_file', () => writeFileInside(worktree, path, content, { readOnly })),
    listFiles: (path) =>
      reported('list_files', () => listFilesInside(worktree, path, { maxEntries: MAX_TOOL_LISTED_FILES })),
    deleteFile: (path) => reported('delete_file', () => deleteFileInside(worktree, path, { readOnly })),
    ...(options.runTests ? { runTests: options.runTests } : {}),
  };
}

const PATH_DESCRIPTION = 'A path relative to the worktree root, with "/" between folders (no leading "/", no "..").';
const PathInput = z.object({ path: z.string() });
const WriteInput = z.object({ path: z.string(), content: z.string() });
const ListInput = z.object({ path: z.string().optional() });
const TestInput = z.object({ files: z.array(z.string()).optional() });

/**
 * The worktree tools over `access`; `run_tests` only when `access.runTests` is given. Handlers check their
 * input and throw on anything refused: the tool loop hands the message to the model as an error result.
 */
export function worktreeTools(access: WorktreeAccess): AgentTool[] {
  const tools: AgentTool[] = [
    {
      name: 'read_file',
      description: 'Read a text file of your worktree. Returns its whole content.',
      inputSchema: objectSchema({ path: { type: 'string', description: PATH_DESCRIPTION } }, ['path']),
      run: async (input) => access.readFile(parse(PathInput, input).path),
      summarize: (input) => pathOf(input),
    },
    {
      name: 'write_file',
      description:
        'Create or replace a file of your worktree with the given content (the whole file, not a diff). Missing folders are made. Read-only files are refused.',
      inputSchema: objectSchema(
        {
          path: { type: 'string', description: PATH_DESCRIPTION },
          content: { type: 'string', description: 'The whole new content of the file.' },
        },
        ['path', 'content'],
      ),
      run: async (input) => {
        const { path, content } = parse(WriteInput, input);
        await access.writeFile(path, content);
        return `wrote ${path} (${Buffer.byteLength(content)} bytes)`;
      },
      // The path and the size: file contents never go into the call's record.
      summarize: (input) => {
        const content = (input as { content?: unknown } | null)?.content;
        return typeof content === 'string' ? `${pathOf(input)} (${Buffer.byteLength(content)} bytes)` : pathOf(input);
      },
    },
    {
      name: 'list_files',
      description: `List the files of your worktree, or of one folder of it, one path per line (.git and node_modules are left out; at most ${MAX_TOOL_LISTED_FILES}).`,
      inputSchema: objectSchema(
        { path: { type: 'string', description: `${PATH_DESCRIPTION} Default: the whole worktree (".").` } },
        [],
      ),
      run: async (input) => {
        const path = parse(ListInput, input).path ?? '.';
        const files = await access.listFiles(path);
        if (files.length === 0) return `no files under ${path}`;
        const cut =
          files.length >= MAX_TOOL_LISTED_FILES
            ? `\n(the list stops at ${MAX_TOOL_LISTED_FILES} files; list a folder to see more)`
            : '';
        return files.join('\n') + cut;
      },
      summarize: (input) => pathOf(input) || '.',
    },
    {
      name: 'delete_file',
      description: 'Delete a file of your worktree. Read-only files are refused; folders are not deleted.',
      inputSchema: objectSchema({ path: { type: 'string', description: PATH_DESCRIPTION } }, ['path']),
      run: async (input) => {
        const { path } = parse(PathInput, input);
        await access.deleteFile(path);
        return `deleted ${path}`;
      },
      summarize: (input) => pathOf(input),
    },
  ];
  if (access.runTests) tools.push(runTestsTool(access.runTests));
  return tools;
}

/** `run_tests`: the project's test command on some test files or the whole suite; a summary and the output's end. */
function runTestsTool(runTests: NonNullable<WorktreeAccess['runTests']>): AgentTool {
  return {
    name: 'run_tests',
    description:
      "Run the project's test command in your worktree, on the given test files or on the whole suite. Returns a one-line summary and the end of the output.",
    inputSchema: objectSchema(
      {
        files: {
          type: 'array',
          items: { type: 'string' },
          description: `Test files to run, each ${PATH_DESCRIPTION} Default: the whole suite.`,
        },
      },
      [],
    ),
    run: async (input, context) => {
      const files = parse(TestInput, input).files ?? [];
      const run = await runTests(files, context.signal);
      const output =
        run.output.length > MAX_TEST_OUTPUT_CHARS
          ? `… (output cut; its end follows)\n${run.output.slice(-MAX_TEST_OUTPUT_CHARS)}`
          : run.output;
      return `${run.passed ? 'PASSED' : 'FAILED'}: ${run.summary}\n\n${output}`;
    },
    summarize: (input) => {
      const files = (input as { files?: unknown } | null)?.files;
      return Array.isArray(files) && files.length > 0 ? files.map(String).join(' ') : '(all)';
    },
  };
}

function objectSchema(properties: JsonSchemaObject, required: string[]): JsonSchemaObject {
  return { type: 'object', properties, required, additionalProperties: false };
}

/** The input checked against `schema`; the first issues, named by field, are the error the model reads. */
function parse<T>(schema: z.ZodType<T>, input: unknown): T {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.join('.') || '(input)'}: ${issue.message}`);
  throw new Error(`invalid input: ${issues.join('; ')}`);
}

function pathOf(input: unknown): string {
  const path = (input as { path?: unknown } | null)?.path;
  return typeof path === 'string' ? path : '';
}
