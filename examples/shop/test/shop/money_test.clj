(ns shop.money-test
  (:require [clojure.test :refer [deftest is testing]]
            [shop.money :as money]))

(deftest cents
  (is (= 1205 (money/cents 12 5))))

(deftest format-cents
  (testing "two decimals"
    (is (= "12.05" (money/format-cents 1205)))
    (is (= "0.50" (money/format-cents 50)))))
