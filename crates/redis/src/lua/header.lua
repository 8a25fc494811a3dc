#!lua name=__LIBRARY__
-- The head of every seckill library (crates/redis/src/library.rs).
-- `register` adds the library's version to each function's name: function
-- names are global on a server, and two versions of seckill running side by
-- side (a rolling deploy) must each call their own code.
local function register(name, callback, flags)
  redis.register_function({
    function_name = name .. '___VERSION__',
    callback = callback,
    flags = flags,
  })
end
