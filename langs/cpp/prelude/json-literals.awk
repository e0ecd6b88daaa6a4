# Debian's nlohmann/json.hpp with its two string literal operators (_json, _json_pointer) declared
# instead of defined inline: `make prelude` writes it as prelude/nlohmann-json.hpp and
# prelude/kiln.cpp defines them in libkiln.a (see kiln.hpp). Every other line is the header's own,
# at its own line number. Exits 3, printing nothing useful, unless both were found as expected.
function body_follows(first, second, third) {
    return first == "{" && second ~ /^    return nlohmann::json(::json_pointer)?(::parse)?\(/ && third == "}"
}
{ line[NR] = $0 }
END {
    for (i = 1; i <= NR; i++) {
        if ((line[i] == "inline nlohmann::json operator \"\" _json(const char* s, std::size_t n)" \
             || line[i] == "inline nlohmann::json::json_pointer operator \"\" _json_pointer(const char* s, std::size_t n)") \
            && body_follows(line[i + 1], line[i + 2], line[i + 3])) {
            print substr(line[i], 8) ";"
            print ""
            print ""
            print ""
            i += 3
            found++
            continue
        }
        print line[i]
    }
    if (found != 2) exit 3
}
