(ns shop.cart-test
  (:require [clojure.test :refer [deftest is]]
            [shop.cart :as cart]))

(deftest totals
  (is (= 756 (cart/total [{:name "tea" :price 350 :qty 2}]))))
