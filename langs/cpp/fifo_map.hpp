// kiln: checkers written for Codebattle include "../fifo_map.hpp" and declare
//
//   template<class K, class V, class dummy_compare, class A>
//   using fifo_map = nlohmann::fifo_map<K, V, nlohmann::fifo_map_compare<K>, A>;
//   using json = nlohmann::basic_json<fifo_map>;
//
// to get JSON objects that keep their keys in insertion order. nlohmann's own `ordered_map`
// (the object type of nlohmann::ordered_json) does exactly that, so `fifo_map` is that map
// under the name those checkers use; the comparator argument is accepted and ignored.
#ifndef NLOHMANN_FIFO_MAP_HPP
#define NLOHMANN_FIFO_MAP_HPP

#include <functional>
#include <memory>
#include <utility>

#include <nlohmann/json.hpp>

namespace nlohmann {

template <class Key>
struct fifo_map_compare {
    // Insertion order is kept by the container itself; this type only names the argument.
    bool operator()(const Key& lhs, const Key& rhs) const { return std::less<Key>()(lhs, rhs); }
};

template <class Key, class T, class Compare = fifo_map_compare<Key>,
          class Allocator = std::allocator<std::pair<const Key, T>>>
using fifo_map = ordered_map<Key, T, Compare, Allocator>;

}  // namespace nlohmann

#endif  // NLOHMANN_FIFO_MAP_HPP
