/**
 * Cross-referencing (seed 000, use case B, stage 5). The stage depends on the concept graph alone, so it
 * links what the graph records: for each concept, the sections that discuss it and the concepts discussed
 * in the same sections. Concepts spanning several sections are the document's threads; a concept sharing
 * no section with any other is reported as unlinked for the reviewer.
 */
import type { ConceptGraphInput, CrossReferenceArtefact } from './artefacts';
import { compareText } from './language';

/** Related concepts listed per concept. */
export const MAX_RELATED = 8;

/** Cross-references the concepts of a graph through the sections that mention them. */
export function crossReference(graph: ConceptGraphInput): CrossReferenceArtefact {
  const headings = new Map(graph.sections.map((section) => [section.id, section.heading]));
  const order = [...graph.sections.map((section) => section.id)];
  const members = new Map<string, string[]>();
  for (const node of graph.nodes) {
    for (const section of new Set(node.sections)) {
      if (!members.has(section)) {
        members.set(section, []);
        if (!headings.has(section)) order.push(section);
      }
      members.get(section)!.push(node.id);
    }
  }

  const links = graph.nodes.map((node) => {
    const shared = new Map<string, number>();
    for (const section of new Set(node.sections)) {
      for (const other of members.get(section) ?? [])
        if (other !== node.id) shared.set(other, (shared.get(other) ?? 0) + 1);
    }
    const related = [...shared]
      .sort((a, b) => b[1] - a[1] || compareText(a[0], b[0]))
      .slice(0, MAX_RELATED)
      .map(([concept, sharedSections]) => ({ concept, sharedSections }));
    return {
      concept: node.id,
      label: node.label,
      type: node.type,
      count: node.count,
      sections: [...new Set(node.sections)],
      related,
    };
  });

  return {
    sections: order.map((id) => ({ id, heading: headings.get(id) ?? '', concepts: members.get(id) ?? [] })),
    links,
    crossSection: links.filter((link) => link.sections.length >= 2).map((link) => link.concept),
    unlinked: links.filter((link) => link.related.length === 0).map((link) => link.concept),
  };
}
