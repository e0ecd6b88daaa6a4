package solution;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;

// An example checker for kiln's java workspace: calls solution(a, b) for each pair and prints
// DESIGN.md's protocol, one JSON array of {"type", "value", "time", "output"} items, with gson.
public class Checker {
    public static void main(String[] args) {
        int[][] pairs = {{1, 2}, {10, 20}, {-5, 5}};
        PrintStream stdout = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        Solution instance = new Solution();
        List<Map<String, Object>> items = new ArrayList<>();
        for (int[] pair : pairs) {
            Map<String, Object> item = new LinkedHashMap<>();
            long start = System.nanoTime();
            try {
                Object value = instance.solution(pair[0], pair[1]);
                item.put("type", "result");
                item.put("value", value);
            } catch (Exception e) {
                item.put("type", "error");
                item.put("value", e.toString());
            }
            item.put("time", String.format(Locale.ROOT, "%.7f", (System.nanoTime() - start) / 1e9));
            System.out.flush();
            item.put("output", captured.toString(StandardCharsets.UTF_8));
            captured.reset();
            items.add(item);
        }
        System.setOut(stdout);
        Gson gson = new GsonBuilder().disableHtmlEscaping().serializeNulls().create();
        System.out.println(gson.toJson(items));
    }
}
