<?php
// kiln's PHP harness, first part (see ../README.md): php runs this file before solution.php.
//
// - Plain mode (no asserts.json, or not {"arguments": [[arg, ...], ...]}): nothing happens and
//   php runs solution.php exactly as `php solution.php` would.
// - Harness mode: harness.php starts capturing stdout; php runs solution.php as its main script
//   (loading it); append.php then calls solution(...$args) for each list and prints the report.
//
// Every run compiles this file, so it is small and leaves nothing the solution could see (no
// global variable, function or class): the harness mode lives in harness.php.
(static function (): void {
    // A prestarted php (prestart.php) runs this file itself once its request is there, not at
    // its start: its request's files may be written while it starts.
    if (($GLOBALS['argv'][0] ?? null) === 'prestart.php' || !is_file('asserts.json')) {
        return;
    }
    $data = file_get_contents('asserts.json');
    // Without '"arguments"' (or a \u escape that could spell it) this is plain mode: no JSON parsing.
    if ($data === false || (strpos($data, '"arguments"') === false && strpos($data, '\u') === false)) {
        return;
    }
    require __DIR__ . '/harness.php';
    KilnHarness::start($data);
})();
