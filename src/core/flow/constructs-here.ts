/**
 * The constructs a live execution wrote rows in (each path's prefixes before a `[`: `loop`, `forEach(items)`,
 * `a[1]/b`), kept instead of the rows themselves: an execution never reads back a row it wrote, so a
 * 20,000-iteration loop keeps one entry, not 20,000 rows with their outputs (issue 40: a control-flow run's
 * bookkeeping bounded like a straight line's).
 *
 * @example
 * const here = new ConstructsHere();
 * here.add('forEach(items)[3]/Worker.work');
 * here.has('forEach(items)'); // true
 */
export class ConstructsHere {
  private readonly constructs = new Set<string>();

  add(path: string): void {
    for (let at = path.indexOf('['); at >= 0; at = path.indexOf('[', at + 1)) this.constructs.add(path.slice(0, at));
  }

  has(construct: string): boolean {
    return this.constructs.has(construct);
  }
}
