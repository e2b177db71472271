/**
 * `POST /api/decisions/:key/fork` `{ from, settings? }` (issue 42): forks the work item a pending decision belongs
 * to from one of its stages, with changed settings written as `treadle fork --overrides` takes them (YAML or JSON
 * text), as `treadle fork <item> --from <stage>` would. Like cancel, only from a decision the signed-in reviewer
 * may answer.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parse as parseYaml } from 'yaml';
import type { SpecOverrides } from '../model/spec-overrides';
import { answeringGroup, type Reviewer } from './auth';
import type { InboxBackend } from './backend';
import type { DecisionIndex } from './decision-index';

/** The longest settings text a fork from the inbox takes. */
const MAX_SETTINGS_CHARS = 20_000;

/** What the route needs of the inbox server. */
export interface ForkRouteContext {
  backend: InboxBackend;
  index: DecisionIndex;
  guard(request: FastifyRequest, reply: FastifyReply): Reviewer | undefined;
  refuse(reply: FastifyReply, status: number, error: string, message: string): FastifyReply;
}

export function registerForkRoute(app: FastifyInstance, ctx: ForkRouteContext): void {
  app.post('/api/decisions/:key/fork', async (request, reply) => {
    const reviewer = ctx.guard(request, reply);
    if (!reviewer) return reply;
    const { key } = request.params as { key: string };
    const decision = ctx.index.get(key);
    if (!decision) return ctx.refuse(reply, 404, 'not_found', `no pending decision ${key}`);
    if (answeringGroup(reviewer, decision.reviewers) === false)
      return ctx.refuse(reply, 403, 'forbidden', `only the decision's reviewers can fork its work item`);
    const body = (request.body ?? {}) as { from?: unknown; settings?: unknown };
    const request_ = forkRequest(body);
    if (typeof request_ === 'string') return ctx.refuse(reply, 422, 'refused', request_);
    try {
      return await ctx.backend.fork(decision.itemId, request_);
    } catch (e) {
      return ctx.refuse(reply, 422, 'refused', e instanceof Error ? e.message : String(e));
    }
  });
}

/** The fork's stage and settings from a request body, or what is wrong with it. */
function forkRequest(body: {
  from?: unknown;
  settings?: unknown;
}): { from: string; overrides?: SpecOverrides } | string {
  if (typeof body.from !== 'string' || body.from.trim() === '') return 'name the stage to fork from';
  const from = body.from.trim();
  if (body.settings === undefined || (typeof body.settings === 'string' && body.settings.trim() === ''))
    return { from };
  if (typeof body.settings !== 'string' || body.settings.length > MAX_SETTINGS_CHARS)
    return `settings must be YAML or JSON text of at most ${MAX_SETTINGS_CHARS} characters`;
  let overrides: unknown;
  try {
    overrides = parseYaml(body.settings);
  } catch (e) {
    return `the settings are not YAML or JSON: ${(e as Error).message.split('\n')[0]}`;
  }
  if (typeof overrides !== 'object' || overrides === null || Array.isArray(overrides))
    return 'the settings must be an object: pipeline keys, and stages: { <name>: { … } }';
  return { from, overrides: overrides as SpecOverrides };
}
