import { readFileSync } from 'fs';

const [a, b]: number[] = readFileSync(0, 'utf8').trim().split(/\s+/).map(Number);
console.log(a + b);
