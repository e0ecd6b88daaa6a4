fun main() {
    val (a, b) = System.`in`.bufferedReader().readText().trim().split(Regex("\\s+")).map(String::toLong)
    println(add(a, b))
}
