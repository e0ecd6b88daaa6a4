import { readFileSync } from 'fs';
import { add } from './adder';

const [a, b]: number[] = readFileSync(0, 'utf8').trim().split(/\s+/).map(Number);
console.log(add(a, b));
