(ns shop.cart-test
  (:require [clojure.test :refer [deftest is]]
            [shop.cart :as cart]
            [shop.money :as money]))

(deftest totals
  (is (= 756 (cart/total [{:name "tea" :price 350 :qty 2}]))))

(deftest cents
  (is (= 1205 (money/cents 12 5))))
