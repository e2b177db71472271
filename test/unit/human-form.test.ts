/**
 * The form of a `human` decision (issue 40), generated on the server from the stage's output_schema: each
 * supported schema shape becomes its control with the schema's constraints, and what the form cannot render
 * falls back to a JSON textarea that says so.
 */
import { humanForm } from '../../src/ui/pages/human-form';
import { ANSWERS, type DecisionDetail, type PendingDecision } from '../../src/model/decisions';

const decision: PendingDecision = {
  key: 'item-1~human~sign_off',
  kind: 'human',
  workflowId: 'item-1',
  itemId: 'item-1',
  pipeline: 'p',
  stage: 'sign_off',
  reason: 'human',
  message: 'Sign it off',
  requestedAt: '2026-12-06T10:00:00.000Z',
  attempt: 2,
  answers: ANSWERS.human,
};

function formOf(outputSchema: unknown, human: DecisionDetail['human'] = { attempt: 1 }): string {
  // Whitespace as one space: the template's line breaks are not the form's.
  return humanForm(decision, { decision, outputSchema, human, live: true })
    .toString()
    .replace(/\s+/g, ' ')
    .replace(/> </g, '><');
}

describe('the human form', () => {
  it('renders each supported shape as its control, with the schema constraints', () => {
    const form = formOf({
      type: 'object',
      required: ['approved', 'signed_by', 'count'],
      properties: {
        approved: { type: 'boolean', title: 'Approved' },
        signed_by: { type: 'string', maxLength: 80, format: 'email' },
        notes: { type: 'string', description: 'Anything else' },
        count: { type: 'integer', minimum: 1, maximum: 9 },
        ratio: { type: 'number' },
        region: { enum: ['eu', 'us'] },
        tags: { type: 'array', items: { type: 'string', maxLength: 20 }, minItems: 1 },
        address: { type: 'object', properties: { city: { type: 'string', maxLength: 40 } } },
      },
    });
    expect(form).toContain('data-testid="human-form"');
    expect(form).toMatch(/data-kind="boolean" data-name="approved" data-required="true" ><input type="checkbox"/);
    expect(form).toContain('<input type="email" data-input value="" required maxlength="80" />');
    expect(form).toContain('<span class="sub">Anything else</span><textarea rows="3" data-input >');
    expect(form).toContain('<input type="number" data-input required step="1" min="1" max="9" value="" />');
    expect(form).toContain('<input type="number" data-input step="any" value="" />');
    expect(form).toContain(
      '<select data-input ><option value="">(none)</option><option value="&quot;eu&quot;">eu</option>',
    );
    // An array: one row to start (minItems), a template row and add/remove buttons.
    expect(form).toMatch(/data-kind="array" data-name="tags"[^]*?<div class="rows"><div class="row">/);
    expect(form).toContain('<template><div class="row">');
    expect(form).toContain('data-form-action="add-row"');
    expect(form).toContain('data-form-action="remove-row"');
    // A nested object: a fieldset of its own.
    expect(form).toContain('data-kind="object" data-name="address" data-required="false" ><legend>');
    expect(form).not.toContain('Edited as JSON');
  });

  it('falls back to a JSON textarea for what it cannot render, and says so', () => {
    const form = formOf({
      type: 'object',
      properties: { choice: { oneOf: [{ type: 'string' }, { type: 'number' }] }, any: { type: ['string', 'null'] } },
    });
    expect(form).toMatch(/data-kind="json" data-name="choice"/);
    expect(form).toContain('Edited as JSON: the form does not render oneOf.');
    expect(form).toContain('Edited as JSON: the form does not render a list of types.');
  });

  it("shows the instructions and the gate's feedback on the previous answer", () => {
    const form = formOf({ type: 'boolean' }, { attempt: 2, instructions: 'Sign <it> off', feedback: 'not dated' });
    expect(form).toContain('<p class="instructions">Sign &lt;it&gt; off</p>');
    expect(form).toContain('The gate sent the previous answer back: not dated');
  });
});
