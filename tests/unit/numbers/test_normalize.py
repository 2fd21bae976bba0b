from pipeline.numbers.normalize import normalize, normalize_phrase, parse_chinese_number


def test_traditional_full_width_case_and_punctuation():
    assert normalize("保證穩賺不賠！").text == "保证稳赚不赔"
    assert normalize("ＮＯ　ＲＩＳＫ，ok?").text == "no risk ok"
    assert normalize("稳赚，不赔").text == "稳赚不赔"  # punctuation between Chinese characters goes


def test_stray_spaces_around_chinese_are_removed():
    assert normalize("请问 您 是 张 先生 吗 ？").text == "请问您是张先生吗"
    assert normalize("我的 visa 卡").text == "我的visa卡"


def test_mandarin_digits_read_one_by_one():
    assert normalize("卡号是六二二二，幺三八零").text == "卡号是6222 1380"
    assert normalize("一 三 八 零 零").text == "13800"


def test_mandarin_positional_numbers():
    assert normalize("我借了三万五千块").text == "我借了35000块"
    assert parse_chinese_number("一千零五") == 1005
    assert parse_chinese_number("三万五") == 35000
    assert parse_chinese_number("一百五") == 150
    assert parse_chinese_number("十二") == 12
    assert parse_chinese_number("两千三") == 2300
    assert parse_chinese_number("一万零五百") == 10500


def test_ordinary_words_with_numerals_are_left_alone():
    assert normalize("万一出事，一定要说").text == "万一出事一定要说"
    assert normalize("三四个人").text == "三四个人"  # "three or four", not 34


def test_english_spoken_digits():
    assert normalize("Four five three two - double five, oh one").text == "4532 55 01"
    assert normalize("triple seven").text == "777"
    assert normalize("No one said so").text == "no one said so"  # a single digit word stays


def test_original_span_maps_back():
    norm = normalize("卡号：六二二二")
    start = norm.text.index("6")
    assert norm.original_span(start, len(norm.text)) == (3, 7)
    eng = normalize("it is four five six")
    i = eng.text.index("456")
    assert eng.original[slice(*eng.original_span(i, i + 3))] == "four five six"


def test_phrases_normalise_like_transcripts():
    assert normalize_phrase("保證收益") == normalize("他说保证收益").text[2:]
    assert normalize_phrase("No Risk") == "no risk"


def test_decimal_digits_of_every_script_become_ascii_and_map_back():
    norm = normalize("رقمي ٤١٥-٥٥٥ और ४२ ４５")
    assert norm.text == "رقمي 415 555 और 42 45"
    i = norm.text.index("415")
    assert norm.original[slice(*norm.original_span(i, i + 3))] == "٤١٥"
    assert normalize("一二٣四").text == "1234"  # a digit of another script inside a Chinese run


def test_digits_int_cannot_read_are_left_as_they_are():
    # "፩" (Ethiopic one) is a Unicode digit that NFKC keeps and int() rejects.
    assert normalize("十፩").text == "10፩"
    assert normalize("一二፩三").text == "一二፩三"
    assert parse_chinese_number("十፩") is None


def test_asr_spellings_of_spoken_digits():
    assert normalize("我的手机号是要81，8222，2541").text == "我的手机号是181 8222 2541"  # 要 for 幺
    assert normalize("我要81块").text == "我要81块"
    assert normalize("我的卡号是518i,929,285i,5440").text == "我的卡号是5181 929 2851 5440"  # i for 一 (yī)
    assert normalize("我用iPhone 15 i7，屏幕6in").text == "我用iphone 15 i7屏幕6in"  # words, not digits
    assert normalize("my pin is 518i").text == "my pin is 518i"  # English text: left alone
    assert normalize("手机号是要三七四要四零三六五四").text == "手机号是13741403654"  # and between digits
    assert normalize("三个要五个").text == "三个要五个"
    assert normalize("要四六一一零零三三").text == "146110033"  # a number read on after a pause
    assert normalize("要三四天").text == "要三四天" and normalize("要五六个人").text == "要五六个人"
    assert normalize("four, five. 3 nine").text == "4 5 39"
    assert normalize("five for three").text == "543"  # a homophone between digits
    assert normalize("I want to go for 2 days").text == "i want to go for 2 days"
    assert normalize("幺三，八一二三").text == "13 8123"  # a short run beside a number


def test_a_digit_string_with_a_unit_misheard_in_it_is_still_digits():
    # an ID read digit by digit came out with 十 in it (16 kHz mono): no positional number, so its
    # digits are digits, 十 the 四 it most often is
    assert normalize("身份证号码是三一零一零四一九十五六七二五八五三一。").text == "身份证号码是310104194567258531"
    assert normalize("三十五").text == "35" and normalize("一九八五年").text == "1985年"
    assert normalize("一百二十三万").text == "1230000"
