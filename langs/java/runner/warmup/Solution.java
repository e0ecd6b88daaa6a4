package solution;

import java.util.*;
import java.util.stream.*;

// Install-time warm-up only (see ../../Makefile `prepare`): typical solution code, so that the
// classes it touches land in the class data sharing archive.
public class Solution {
    public List<Integer> solution(Integer a, Integer b, String text, Double ratio, Boolean flag, Map<String, String> names, List<String> words) {
        System.out.println("sum of " + a + " and " + b);
        Map<String, Integer> counts = new HashMap<>();
        for (String word : words) {
            counts.merge(word, 1, Integer::sum);
        }
        List<Integer> result = new ArrayList<>(counts.values());
        Collections.sort(result);
        String joined = words.stream().map(String::toUpperCase).filter(w -> !w.isEmpty()).collect(Collectors.joining(","));
        StringBuilder sb = new StringBuilder(joined).reverse();
        int[] sorted = IntStream.rangeClosed(1, 10).map(i -> i * a % 7).sorted().toArray();
        Set<Character> letters = new TreeSet<>();
        for (char c : text.toCharArray()) {
            letters.add(Character.toLowerCase(c));
        }
        Deque<Integer> queue = new ArrayDeque<>(List.of(a, b));
        long big = Math.max(Arrays.stream(sorted).sum(), Math.round(ratio * 10));
        result.add(a + b + queue.size() + letters.size() + sb.length() + (int) big + (flag ? 1 : 0) + names.size());
        return result;
    }
}
