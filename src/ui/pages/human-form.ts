/**
 * The form of a `human` decision (issue 40), generated on the server from the stage's `output_schema`: a string
 * is a text field (a textarea when long or unbounded), a number or integer a number field with its bounds, a
 * boolean a checkbox, an enum a select, an array repeatable rows with add and remove, a nested object a fieldset.
 * The HTML constraints give instant feedback; the schema itself is checked by `POST /api/decisions/:key/check`
 * before the answer is posted (inbox.js `submitHumanForm`). A part of the schema the form cannot render (a `$ref`,
 * `oneOf`, a type list…) is a JSON textarea, and the page says so. Kept apart from detail.ts on purpose.
 */
import type { DecisionDetail, PendingDecision } from '../../model/decisions';
import { html, type SafeHtml } from '../html';
import { TEST_IDS } from '../test-ids';

type Schema = Record<string, unknown>;

/** Keywords that change what a value may be in ways the form cannot show: those parts are edited as JSON. */
const UNSUPPORTED = ['$ref', '$dynamicRef', 'oneOf', 'anyOf', 'allOf', 'not', 'if', 'patternProperties', 'prefixItems'];

/** A string longer than this (or unbounded) gets a textarea. */
const SHORT_TEXT = 200;
/** How deep the form nests fieldsets and rows before it falls back to JSON. */
const MAX_DEPTH = 6;

const isSchema = (value: unknown): value is Schema =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Why `schema` is edited as JSON, or undefined when the form renders it. */
function unsupported(schema: Schema, depth: number): string | undefined {
  if (depth > MAX_DEPTH) return 'nested too deep';
  const keyword = UNSUPPORTED.find((k) => k in schema);
  if (keyword) return keyword;
  if (Array.isArray(schema.enum))
    return schema.enum.every((v) => typeof v === 'string' || typeof v === 'number')
      ? undefined
      : 'an enum of other than strings and numbers';
  if (Array.isArray(schema.type)) return 'a list of types';
  if (schema.type === 'array' && !isSchema(schema.items)) return 'an array without one items schema';
  if (schema.type === 'object' && !isSchema(schema.properties)) return 'an object without properties';
  if (!['string', 'number', 'integer', 'boolean', 'object', 'array'].includes(String(schema.type)))
    return schema.type === undefined ? 'no type' : `type ${String(schema.type)}`;
  return undefined;
}

/** One field's label: its title, else its property name; its description under it. */
function label(name: string, schema: Schema, required: boolean): SafeHtml {
  const title = typeof schema.title === 'string' ? schema.title : name;
  return html`<span class="field-label">${title}${required ? html` <abbr title="required">*</abbr>` : ''}</span>${
      typeof schema.description === 'string' ? html`<span class="sub">${schema.description}</span>` : ''
    }`;
}

const num = (value: unknown): string | undefined => (typeof value === 'number' ? String(value) : undefined);

/** The input of a string field, by its length and format. */
function stringInput(schema: Schema, required: boolean): SafeHtml {
  const max = typeof schema.maxLength === 'number' ? schema.maxLength : undefined;
  const attrs = {
    min: num(schema.minLength),
    max: num(schema.maxLength),
    pattern: typeof schema.pattern === 'string' ? schema.pattern : undefined,
  };
  const initial = typeof schema.default === 'string' ? schema.default : '';
  if (max === undefined || max > SHORT_TEXT)
    return html`<textarea
      rows="3"
      data-input
      ${required ? 'required' : ''}
      ${attrs.min ? html`minlength="${attrs.min}"` : ''}
      ${attrs.max ? html`maxlength="${attrs.max}"` : ''}
    >
${initial}</textarea>`;
  const type =
    schema.format === 'email' ? 'email' : schema.format === 'uri' ? 'url' : schema.format === 'date' ? 'date' : 'text';
  return html`<input
    type="${type}"
    data-input
    value="${initial}"
    ${required ? 'required' : ''}
    ${attrs.min ? html`minlength="${attrs.min}"` : ''}
    ${attrs.max ? html`maxlength="${attrs.max}"` : ''}
    ${attrs.pattern ? html`pattern="${attrs.pattern}"` : ''}
  />`;
}

/** One field of `schema` named `name` (a property, or `item` in an array row). */
function field(name: string, schema: Schema, required: boolean, depth: number): SafeHtml {
  const why = unsupported(schema, depth);
  if (why !== undefined)
    return html`<label class="field" data-kind="json" data-name="${name}" data-required="${required ? 'true' : 'false'}"
      >${label(name, schema, required)}<textarea rows="4" spellcheck="false" data-input>
${schema.default !== undefined ? JSON.stringify(schema.default, null, 2) : ''}</textarea
      ><span class="sub">Edited as JSON: the form does not render ${why}.</span></label
    >`;
  const common = (kind: string) =>
    html`data-kind="${kind}" data-name="${name}" data-required="${required ? 'true' : 'false'}"`;
  if (Array.isArray(schema.enum))
    return html`<label class="field" ${common('enum')}
      >${label(name, schema, required)}<select data-input ${required ? 'required' : ''}>
        ${required ? '' : html`<option value="">(none)</option>`}
        ${schema.enum.map((v) => html`<option value="${JSON.stringify(v)}">${String(v)}</option>`)}
      </select></label
    >`;
  switch (schema.type) {
    case 'string':
      return html`<label class="field" ${common('string')}
        >${label(name, schema, required)}${stringInput(schema, required)}</label
      >`;
    case 'number':
    case 'integer':
      return html`<label class="field" ${common(schema.type)}
        >${label(name, schema, required)}<input
          type="number"
          data-input
          ${required ? 'required' : ''}
          step="${schema.type === 'integer' ? '1' : 'any'}"
          ${num(schema.minimum) ? html`min="${num(schema.minimum)}"` : ''}
          ${num(schema.maximum) ? html`max="${num(schema.maximum)}"` : ''}
          value="${num(schema.default) ?? ''}"
      /></label>`;
    case 'boolean':
      return html`<label class="field" ${common('boolean')}
        ><input type="checkbox" data-input ${schema.default === true ? 'checked' : ''} />
        ${label(name, schema, required)}</label
      >`;
    case 'array': {
      const items = schema.items as Schema;
      const row = html`<div class="row">
        ${field('item', items, true, depth + 1)}<button type="button" data-form-action="remove-row">Remove</button>
      </div>`;
      const initial = typeof schema.minItems === 'number' ? Math.min(schema.minItems, 20) : 0;
      return html`<fieldset class="field" ${common('array')}>
        <legend>${label(name, schema, required)}</legend>
        <div class="rows">${Array.from({ length: initial }, () => row)}</div>
        <template>${row}</template>
        <button type="button" data-form-action="add-row">Add</button>
      </fieldset>`;
    }
    default:
      return objectFields(name, schema, required, depth);
  }
}

/** A nested object: a fieldset of its properties, the required ones marked. */
function objectFields(name: string, schema: Schema, required: boolean, depth: number): SafeHtml {
  const properties = schema.properties as Record<string, unknown>;
  const needed = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  return html`<fieldset
    class="field"
    data-kind="object"
    data-name="${name}"
    data-required="${required ? 'true' : 'false'}"
  >
    ${depth > 0 ? html`<legend>${label(name, schema, required)}</legend>` : ''}
    <div class="fields">
      ${Object.entries(properties).map(([key, sub]) => field(key, isSchema(sub) ? sub : {}, needed.has(key), depth + 1))}
    </div>
  </fieldset>`;
}

/** The respond form of a `human` decision, with what the person is asked and the gate's feedback. */
export function humanForm(d: PendingDecision, detail: DecisionDetail): SafeHtml {
  const schema = isSchema(detail.outputSchema) ? detail.outputSchema : {};
  const human = detail.human ?? d.human;
  return html`<form class="human-form" data-testid="${TEST_IDS.humanForm}" novalidate>
    ${human?.instructions ? html`<p class="instructions">${human.instructions}</p>` : ''}
    ${human?.feedback ? html`<p class="notice warn" data-testid="${TEST_IDS.humanFeedback}">The gate sent the previous answer back: ${human.feedback}</p>` : ''}
    <div class="human-root">${field('output', schema, true, 0)}</div>
    <p class="notice error" hidden data-testid="${TEST_IDS.humanFormError}"></p>
    <button type="submit" class="primary" data-testid="${TEST_IDS.humanFormSubmit}">Check and send</button>
  </form>`;
}
