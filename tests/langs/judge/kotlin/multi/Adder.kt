fun add(a: Long, b: Long): Long = a + b
