/**
 * Validating structured replies: the spec gives a JSON Schema, zod validates against it
 * (`z.fromJSONSchema`), and the first issues are phrased for feedback so a retry tells the model what to fix.
 */
import { z } from 'zod';
import type { Json } from '../model/shapes';

/** How many validation issues feedback quotes. */
export const QUOTED_ISSUES = 3;

/** Compiles a JSON Schema into a zod schema; throws naming the problem when the schema itself is bad. */
export function compileOutputSchema(schema: Json): z.ZodType {
  try {
    return z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
  } catch (error) {
    throw new Error(`output_schema is not a usable JSON Schema: ${(error as Error).message}`);
  }
}

/** Parses reply text as JSON and validates it; returns the value or the first issues. */
export function validateReply(
  text: string,
  schema: z.ZodType,
): { ok: true; value: Json } | { ok: false; issues: string[] } {
  let value: unknown;
  try {
    value = JSON.parse(extractJson(text));
  } catch (error) {
    return { ok: false, issues: [`the reply is not JSON: ${(error as Error).message}`] };
  }
  return validateValue(value, schema);
}

/** Validates an already-parsed value (tool-use input). */
export function validateValue(
  value: unknown,
  schema: z.ZodType,
): { ok: true; value: Json } | { ok: false; issues: string[] } {
  const parsed = schema.safeParse(value);
  if (parsed.success) return { ok: true, value: parsed.data as Json };
  return {
    ok: false,
    issues: parsed.error.issues
      .slice(0, QUOTED_ISSUES)
      .map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`),
  };
}

/** Accepts a bare JSON reply or one wrapped in a ```json fence. */
function extractJson(text: string): string {
  const fenced = /```(?:json)?\s*([\s\S]*?)```/.exec(text);
  return (fenced ? fenced[1]! : text).trim();
}
