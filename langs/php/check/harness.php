<?php
// kiln's PHP harness, harness mode (see prepend.php and ../README.md).
//
// start():    asserts.json is {"arguments": [[arg, ...], ...]}: capture stdout from here on, so
//             what loading the solution prints becomes the report's "output" item.
// calls():    (append.php, once solution.php ran to its end) call solution(...$args) for each
//             list, print one JSON array line, end the process with status 0.
// shutdown(): the process is ending early: while loading (exit(), a fatal error) the captured
//             output goes out as it is and the process ends as the plain program would; during a
//             call (exit(), a fatal error) that call is an error and the others still run.
//
// Output is captured at the file-descriptor level when FFI is there (fd 1 is a memfd, so echo,
// fwrite(STDOUT), php://stdout and child processes are all captured); else with ob_start().

final class KilnHarness
{
    private const JSON = JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE;
    private const DEPTH = 100000;

    /** @var string 'loading' | 'calling' | 'done' | 'released' */
    private static string $state = 'released';
    private static array $calls = [];
    private static array $items = [];
    private static int $next = 0; // index of the call running or to run
    private static int $started = 0;
    private static ?FFI $ffi = null;
    private static int $capFd = -1;
    private static int $realFd = -1;
    private static int $obLevel = 0;
    private const HELD = '/sandbox/check/.kiln-held-stdout';
    private static bool $held = false; // the capture is HELD_STDOUT, still linked

    public static function start(string $data): void
    {
        $calls = self::parse($data);
        if ($calls === null) {
            return; // plain mode
        }
        self::$calls = $calls;
        self::capture();
        self::$state = 'loading';
        register_shutdown_function([self::class, 'shutdown']); // the first one: it runs before the solution's
    }

    /** The arguments lists (arrays), or null when $data is not of the shape. */
    private static function parse(string $data): ?array
    {
        if (strncmp($data, "\xEF\xBB\xBF", 3) === 0) {
            $data = substr($data, 3);
        }
        // Objects as stdClass first, to tell {"arguments": ...} and [...], [] and {} apart.
        $spec = json_decode($data, false, self::DEPTH);
        if (json_last_error() !== JSON_ERROR_NONE || !($spec instanceof stdClass) || !property_exists($spec, 'arguments')) {
            return null;
        }
        $calls = $spec->arguments;
        if (!is_array($calls)) {
            return null;
        }
        foreach ($calls as $args) {
            if (!is_array($args)) {
                return null;
            }
        }
        // Arguments as solutions get them elsewhere (json_decode(..., true)): objects as arrays.
        $spec = json_decode($data, true, self::DEPTH);
        return $spec['arguments'];
    }

    // ---- stdout capture

    private static function capture(): void
    {
        if (class_exists('FFI', false)) {
            try {
                $ffi = FFI::cdef(
                    'int dup(int); int dup2(int, int); int close(int); int memfd_create(const char *, unsigned int);'
                    . ' int ftruncate(int, long); long lseek(int, long, int); long pread(int, void *, unsigned long, long);'
                    . ' long write(int, const char *, unsigned long); void _exit(int);'
                    . ' int open(const char *, int, unsigned int); int unlink(const char *);'
                );
                // While the solution loads, the capture is kiln's HELD_STDOUT (kiln/native/kiln.h):
                // a load ended abruptly (a kill, the timeout, an OOM) leaves what it printed (echo
                // writes at once) there, and kiln-init passes it on as stdout. Once loaded, it is
                // unlinked (unhold) and stays the capture, as the memory file would.
                $cap = $ffi->open(self::HELD, 0x2 | 0x40 | 0x80 | 0x20000 | 0x80000, 0600); // O_RDWR|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC
                self::$held = $cap >= 0;
                if ($cap < 0) {
                    $cap = $ffi->memfd_create('kiln-stdout', 1); // MFD_CLOEXEC
                }
                $real = $cap >= 0 ? $ffi->dup(1) : -1;
                if ($real >= 0 && $ffi->dup2($cap, 1) === 1) {
                    self::$ffi = $ffi;
                    self::$capFd = $cap;
                    self::$realFd = $real;
                    return;
                }
                if ($real >= 0) {
                    $ffi->close($real);
                }
                if ($cap >= 0) {
                    $ffi->close($cap);
                }
            } catch (Throwable $e) {
                // FFI disabled (ffi.enable): output buffering instead
            }
        }
        ob_start();
        self::$obLevel = ob_get_level();
    }

    /** The bytes printed since the last take(); output buffers the solution left open are flushed into it. */
    private static function take(): string
    {
        if (self::$ffi === null) {
            while (ob_get_level() > self::$obLevel) {
                ob_end_flush();
            }
            $out = ob_get_contents();
            if ($out !== false && $out !== '') {
                ob_clean();
            }
            return $out === false ? '' : $out;
        }
        while (ob_get_level() > 0) {
            ob_end_flush();
        }
        $ffi = self::$ffi;
        $size = $ffi->lseek(self::$capFd, 0, 2); // SEEK_END
        if ($size <= 0) {
            return '';
        }
        $parts = [];
        $got = 0;
        while ($got < $size) {
            $buffer = FFI::new('char[' . ($size - $got) . ']');
            $n = $ffi->pread(self::$capFd, $buffer, $size - $got, $got);
            if ($n <= 0) {
                break;
            }
            $parts[] = FFI::string($buffer, $n);
            $got += $n;
        }
        $ffi->ftruncate(self::$capFd, 0);
        $ffi->lseek(1, 0, 0); // fd 1 shares the memfd's offset
        return implode('', $parts);
    }

    /** Loading is over: the capture is the harness's alone. */
    private static function unhold(): void
    {
        if (self::$held) {
            self::$held = false;
            self::$ffi->unlink(self::HELD);
        }
    }

    /** Back to plain behaviour: the captured bytes go out as they are, stdout is restored. */
    private static function release(): void
    {
        if (self::$state === 'released') {
            return;
        }
        self::unhold();
        $out = self::take();
        self::$state = 'released';
        if (self::$ffi === null) {
            ob_end_clean();
            echo $out;
            return;
        }
        self::$ffi->dup2(self::$realFd, 1);
        self::$ffi->close(self::$realFd);
        self::$ffi->close(self::$capFd);
        self::writeFd(1, $out);
    }

    private static function writeFd(int $fd, string $data): void
    {
        $ffi = self::$ffi;
        $done = 0;
        $size = strlen($data);
        while ($done < $size) {
            $chunk = substr($data, $done, 1 << 20);
            $n = $ffi->write($fd, $chunk, strlen($chunk));
            if ($n <= 0) {
                return;
            }
            $done += $n;
        }
    }

    // ---- calls

    public static function calls(): void
    {
        if (self::$state !== 'loading') {
            return;
        }
        if (!function_exists('solution')) {
            self::release(); // loading was the whole run: php goes on as for a plain script
            return;
        }
        self::unhold();
        $loaded = self::take();
        if ($loaded !== '') {
            self::$items[] = '{"type":"output","value":' . self::text($loaded) . '}';
        }
        self::$state = 'calling';
        self::runCalls();
    }

    private static function runCalls(): void
    {
        $count = count(self::$calls);
        while (self::$next < $count) {
            $args = self::$calls[self::$next];
            self::$started = hrtime(true);
            try {
                $value = solution(...$args);
                $elapsed = hrtime(true) - self::$started;
                $item = '{"type":"result","value":' . self::value($value);
            } catch (Throwable $e) {
                $elapsed = hrtime(true) - self::$started;
                $item = '{"type":"error","value":' . self::text(self::message($e));
                unset($e);
            }
            unset($value);
            self::record($item, $elapsed);
        }
        self::finish();
    }

    private static function record(string $item, int $elapsed): void
    {
        $output = self::take();
        self::$items[] = $item . ',"time":"' . sprintf('%.7f', $elapsed / 1e9) . '","output":' . self::text($output) . '}';
        self::$next++;
    }

    private static function finish(): void
    {
        self::$state = 'done';
        $report = '[' . implode(',', self::$items) . "]\n";
        if (self::$ffi !== null) {
            self::writeFd(self::$realFd, $report);
            self::$ffi->_exit(0); // nothing the solution left behind (shutdown functions, destructors) may print
        }
        while (ob_get_level() > 0) {
            ob_end_clean();
        }
        echo $report;
        ob_start(static fn (string $late): string => ''); // late output is dropped
        exit(0);
    }

    public static function shutdown(): void
    {
        if (self::$state === 'loading') {
            self::release(); // exit() or a fatal error while loading: as the plain program
            return;
        }
        if (self::$state !== 'calling') {
            return;
        }
        // A call ended the process: exit() or a fatal error. It is an error of that call; the
        // others still run, here (an exit() in a second one ends the run without a report).
        $elapsed = hrtime(true) - self::$started;
        $error = error_get_last();
        $fatal = E_ERROR | E_PARSE | E_CORE_ERROR | E_COMPILE_ERROR | E_USER_ERROR | E_RECOVERABLE_ERROR;
        $message = $error !== null && ($error['type'] & $fatal) ? 'Fatal error: ' . $error['message'] : 'exit';
        if (self::$ffi === null) {
            ob_start();
        }
        self::record('{"type":"error","value":' . self::text($message), $elapsed);
        self::runCalls();
    }

    private static function message(Throwable $e): string
    {
        $name = get_class($e);
        $text = $e->getMessage();
        return $text === '' ? $name : "$name: $text";
    }

    // ---- values

    private static function text(string $s): string
    {
        $json = json_encode($s, self::JSON);
        return $json === false ? '""' : $json;
    }

    /** The JSON text of a returned value; never throws. */
    private static function value($value): string
    {
        $json = json_encode($value, self::JSON, self::DEPTH);
        if ($json !== false) {
            return $json;
        }
        try {
            $json = json_encode(self::plain($value, 0), self::JSON | JSON_PARTIAL_OUTPUT_ON_ERROR, self::DEPTH);
            if ($json !== false) {
                return $json;
            }
        } catch (Throwable $e) {
            // fall through
        }
        try {
            return self::text(print_r($value, true));
        } catch (Throwable $e) {
            return '"<unserialisable value>"';
        }
    }

    /** $value with non-finite floats as null (json_encode refuses them). */
    private static function plain($value, int $depth)
    {
        if (is_float($value)) {
            return is_finite($value) ? $value : null;
        }
        if ($depth > 10000) {
            return null;
        }
        if (is_array($value)) {
            $out = [];
            foreach ($value as $k => $v) {
                $out[$k] = self::plain($v, $depth + 1);
            }
            return $out;
        }
        if (is_object($value) && !($value instanceof JsonSerializable) && !($value instanceof Closure)) {
            $out = [];
            foreach (get_object_vars($value) as $k => $v) {
                $out[$k] = self::plain($v, $depth + 1);
            }
            return (object) $out;
        }
        return $value;
    }
}
