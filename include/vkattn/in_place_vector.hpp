// The in-place container behind the ops' argument types that an engine
// builds every step (Extents, BlockSparseCustomBuffers): up to N values held
// in the object, so that building, copying and moving them allocates nothing,
// with the parts of std::vector's interface those types need.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace vkattn::detail {

// Derived names the type in errors: it defines
// [[noreturn]] static void too_many(std::size_t count), called when a value
// would be the (N + 1)-th. T is trivially copyable, and so is the container.
template <class Derived, class T, std::size_t N>
class InPlaceVector {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using iterator = T*;
  using const_iterator = const T*;

  InPlaceVector() = default;
  InPlaceVector(std::initializer_list<T> values) { assign(values); }

  // Too many values throw before any is taken.
  void assign(std::initializer_list<T> values) {
    if (values.size() > N) Derived::too_many(values.size());
    assign(values.begin(), values.end());
  }

  template <class It, class = std::enable_if_t<!std::is_integral_v<It>>>
  void assign(It first, It last) {
    clear();
    for (; first != last; ++first) push_back(static_cast<T>(*first));
  }
  void assign(size_type count, const T& value) {
    clear();
    resize(count, value);
  }

  size_type size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return values_.data(); }
  const T* data() const { return values_.data(); }
  iterator begin() { return values_.data(); }
  iterator end() { return values_.data() + size_; }
  const_iterator begin() const { return values_.data(); }
  const_iterator end() const { return values_.data() + size_; }
  T& operator[](size_type i) { return values_[i]; }
  const T& operator[](size_type i) const { return values_[i]; }
  T& front() { return values_[0]; }
  const T& front() const { return values_[0]; }
  T& back() { return values_[size_ - 1]; }
  const T& back() const { return values_[size_ - 1]; }

  void clear() { size_ = 0; }
  void push_back(const T& value) {
    if (size_ == N) Derived::too_many(size_ + 1);
    values_[size_++] = value;
  }
  void pop_back() { --size_; }
  void resize(size_type count, const T& value = T{}) {
    if (count > N) Derived::too_many(count);
    for (size_type i = size_; i < count; ++i) values_[i] = value;
    size_ = static_cast<uint32_t>(count);
  }
  iterator insert(const_iterator pos, const T& value) {
    const size_type at = static_cast<size_type>(pos - begin());
    if (size_ == N) Derived::too_many(size_ + 1);
    for (size_type i = size_; i > at; --i) values_[i] = values_[i - 1];
    values_[at] = value;
    ++size_;
    return begin() + at;
  }
  iterator erase(const_iterator pos) {
    const size_type at = static_cast<size_type>(pos - begin());
    for (size_type i = at; i + 1 < size_; ++i) values_[i] = values_[i + 1];
    --size_;
    return begin() + at;
  }

 private:
  std::array<T, N> values_{};
  uint32_t size_ = 0;
};

}  // namespace vkattn::detail
