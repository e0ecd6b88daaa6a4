// A TypeScript solution as kiln's ts harness runs it (Codebattle's convention): sent as
// solution_text, written to check/solution.js, compiled by esbuild; its default export is called
// once per argument list of asserts.json ({"arguments": [[1, 2], ...]}). What it prints during a
// call becomes that call's "output"; a thrown error, that call's "error" (its message). lodash and
// rambda may be imported.
import _ from 'lodash';

export default function solution(a: number, b: number): number {
  console.log(`adding ${a} and ${b}`);
  return _.add(a, b);
}
