// FunctionRef: a non-owning, non-allocating reference to a callable, for callbacks
// that are invoked before the call that received them returns (parallel_for
// bodies). The referenced callable must outlive every invocation.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace switchyard {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
           std::is_invocable_r_v<R, F&, Args...>)
      // NOLINTNEXTLINE(google-explicit-constructor): implicit, like a function pointer.
      FunctionRef(F&& f)
  noexcept
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace switchyard
