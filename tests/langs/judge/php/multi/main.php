<?php
require __DIR__ . '/adder.php';

[$a, $b] = array_map('intval', preg_split('/\s+/', trim(stream_get_contents(STDIN))));
echo add($a, $b), "\n";
