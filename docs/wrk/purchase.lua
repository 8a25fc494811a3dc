-- wrk script: POST a one-unit purchase from a random user (no request id).
-- wrk -t2 -c256 -d10s -s docs/wrk/purchase.lua http://127.0.0.1:8080/v1/sales/SALE/purchase
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
math.randomseed(os.time())
request = function()
  return wrk.format(nil, nil, nil, string.format('{"user_id":"u%d"}', math.random(1, 10000000)))
end
