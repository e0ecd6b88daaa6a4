<?php
// A PHP solution as kiln's php harness runs it (Codebattle's convention): a function `solution`,
// called once per argument list of asserts.json ({"arguments": [[1, 2], ...]}). What it prints
// during a call becomes that call's "output"; an exception (Throwable), that call's "error".
function solution($a, $b)
{
    echo "adding $a and $b\n";
    return $a + $b;
}
