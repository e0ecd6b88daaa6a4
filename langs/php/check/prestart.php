<?php
// kiln's PHP harness for a prestarted slot (Makefile `prestart`, and `template`: see
// ../README.md). php starts it ahead of the request, from check/, with the test command's
// prepend and append files (`prepend.php` finds no asserts.json yet and does nothing); it waits
// for kiln's go byte on descriptor 3 (the request's files are then in place), and from there on
// does exactly what the test command does: prepend.php, solution.php, then (php's
// auto_append_file, once this file ran to its end) append.php.
//
// A main script cannot be given to a php already running, so solution.php is included from this
// file's top level (its code runs in the global scope, as a main script's) after $argv and
// $_SERVER are made the test command's; an uncaught exception leaves without this file's frame
// in its trace, so php reports it as for a main script. This file leaves no global name behind
// but for that exception's.

(static function (): void {
    $libc = FFI::cdef('long read(int, void *, unsigned long); int close(int);');
    if (($GLOBALS['argv'][1] ?? null) === '--template') {
        // kiln forks each prestarted task from here: serve returns 1 in every forked task, in
        // its slot, with descriptor 3 its go pipe; 0 once kiln is gone (kiln/native/template_php.c).
        $template = FFI::cdef('int kiln_template_serve(int);', '/proc/self/fd/4');
        $libc->close(4);
        if ($template->kiln_template_serve(3) !== 1) {
            exit(0);
        }
    }
    $go = FFI::new('char[1]');
    $got = $libc->read(3, $go, 1);
    $libc->close(3);
    if ($got !== 1) {
        exit(0); // the slot was closed before a request came
    }
    chdir(__DIR__);
    // what php set at its start, as the test command's php sets it at its own
    $now = microtime(true);
    $main = 'solution.php';
    foreach (['PHP_SELF', 'SCRIPT_NAME', 'SCRIPT_FILENAME', 'PATH_TRANSLATED'] as $key) {
        $_SERVER[$key] = $main;
    }
    $_SERVER['REQUEST_TIME_FLOAT'] = $now;
    $_SERVER['REQUEST_TIME'] = (int) $now;
    $_SERVER['argv'] = $GLOBALS['argv'] = [$main];
    $_SERVER['argc'] = $GLOBALS['argc'] = 1;
})();

require __DIR__ . '/prepend.php';
try {
    include __DIR__ . '/solution.php';
} catch (Throwable $uncaught) {
    (static function (Throwable $e): void {
        // each exception of the chain: its trace up to the include, as if solution.php were the
        // main script
        for (; $e !== null; $e = $e->getPrevious()) {
            $trace = $e->getTrace();
            $cut = array_key_last($trace);
            if ($cut !== null && ($trace[$cut]['file'] ?? null) === __FILE__ && ($trace[$cut]['function'] ?? null) === 'include') {
                $property = new ReflectionProperty($e instanceof Exception ? Exception::class : Error::class, 'trace');
                $property->setValue($e, array_slice($trace, 0, $cut));
            }
        }
    })($uncaught);
    throw $uncaught;
}
